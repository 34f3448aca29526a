"""What the screen looks like under ``NO_COLOR`` (https://no-color.org/).

Textual's own ``NO_COLOR`` filter (``textual.filter.Monochrome``, used on truecolor terminals)
turns every colour into a grey of the same luminance: a bold red ``DOWN`` / ``OVER`` /
``exited`` on the dark background becomes colour 237 on 234 — invisible. :class:`NoColorAlarms`
instead drops every colour (the terminal's default foreground and background, as
``textual.filter.NoColor`` does) and draws what was red, orange or yellow (alarms and warnings)
in reverse video, bold — Rich styles without colour, so an alarm still stands out.
"""

from __future__ import annotations

import colorsys

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.filter import LineFilter

_DEFAULT = Style.from_color(RichColor.parse("default"), RichColor.parse("default"))
_ALARM = Style(bold=True, reverse=True, dim=False)


def is_alarm_colour(color: RichColor | None) -> bool:
    """Whether a foreground colour reads as an alarm or a warning: a saturated hue from red
    through orange to yellow (hue ≤ 70° or ≥ 330°, HSV saturation ≥ 0.45, value ≥ 0.35).
    ``None`` / ``default`` → ``False``."""
    if color is None or color.is_default:
        return False
    r, g, b = color.get_truecolor()
    h, s, v = colorsys.rgb_to_hsv(r / 255, g / 255, b / 255)
    deg = h * 360
    return s >= 0.45 and v >= 0.35 and (deg <= 70 or deg >= 330)


def _has_words(text: str) -> bool:
    """Whether ``text`` has more than spaces and box-drawing / block glyphs (a border or a bar
    keeps its glyphs, not reverse video)."""
    return any(not ch.isspace() and not 0x2500 <= ord(ch) <= 0x259F for ch in text)


class NoColorAlarms(LineFilter):
    """``NO_COLOR`` line filter: every colour removed; alarm-coloured text (see
    :func:`is_alarm_colour`) bold and in reverse video. Dim text stays dim in the default
    colour (never grey on grey); borders and bars (box-drawing glyphs) are not reversed."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        """The segments with colour removed and alarms reversed (text and control kept)."""
        out: list[Segment] = []
        for text, style, control in segments:
            if style is None:
                out.append(Segment(text, None, control))
                continue
            alarm = is_alarm_colour(style.color) and _has_words(text)
            new = style + _DEFAULT
            if alarm:
                new = new + _ALARM
            out.append(Segment(text, new, control))
        return out


__all__ = ["NoColorAlarms", "is_alarm_colour"]
