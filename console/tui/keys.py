"""The one key table of the main screen: it makes the bindings, the help screen's key list, the
footer's choice of keys and the ``--readonly`` filter, and checks the profile's ``[keys]``.

Every :class:`Key` has a stable ``id`` (Textual's keymap remaps by id: ``App.set_keymap``), the
key, the action (an ``action_<name>`` method of the app), a short ``label`` for the footer, a
``help`` sentence for the help screen (``?``) and README's key table, and ``node`` (it changes
the node: hidden and refused under ``--readonly``). ``footer_rank`` orders what the footer
drops first when the terminal is narrow (the highest rank goes first; ``0``: never dropped).

Adding a key: one :class:`Key` in :data:`KEYS` and an ``action_<action>`` method on the app.

A profile remaps keys with a ``[keys]`` table of ``binding id = "key"`` (``"node.hold" =
"ctrl+h"``; several keys comma-separated). :func:`check_keymap` refuses an unknown id or two
bindings of the main screen on one key, naming the profile file and the fix
(:class:`KeymapError`, a :class:`~seat_console.core.profile.ProfileError`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from textual.binding import Binding, BindingType

from seat_console.core.profile import ProfileError

NODE_ACTION_PREFIX = "node."
"""Binding ids starting with this change the node (hold, build, probe, restore…); hidden and
refused under ``--readonly``."""


@dataclass(frozen=True)
class Key:
    """One row of the key table (see the module docstring). ``key``: Textual's key name(s),
    comma-separated; ``display``: how the key is written on screen (``None``: Textual's);
    ``show``: offered in the footer; ``priority``: a Textual priority binding (works inside
    fields)."""

    id: str
    key: str
    action: str
    label: str
    help: str
    footer_rank: int = 0
    show: bool = True
    display: str | None = None
    priority: bool = False

    @property
    def node(self) -> bool:
        """Whether the key changes the node (its id starts with :data:`NODE_ACTION_PREFIX`)."""
        return self.id.startswith(NODE_ACTION_PREFIX)

    def binding(self) -> Binding:
        """The Textual :class:`~textual.binding.Binding` of this row."""
        return Binding(self.key, self.action, self.label, show=self.show, key_display=self.display,
                       priority=self.priority, id=self.id, tooltip=self.help)


KEYS: tuple[Key, ...] = (
    Key("quit", "q", "quit", "quit",
        "Quit the console; while a runbook runs, asks again first: it finishes its current step, then undoes."),
    Key("quit-ctrl", "ctrl+q", "quit", "quit", "Quit, also from inside a text field.",
        show=False, priority=True),
    Key("toggle-pause", "p", "pause", "pause",
        "Stop reading the node (pending reads cancelled); ages keep counting.", footer_rank=7),
    Key("resume", "p", "resume", "resume", "Start reading again; every source is read at once.",
        footer_rank=7),
    Key("refresh-now", "r", "refresh_now", "refresh",
        "Read every source now and reset a failing source's back-off.", footer_rank=8),
    Key("help", "question_mark", "help", "help", "This help: every key, and how to read the panels.",
        display="?"),
    Key("command-palette", "ctrl+p", "command_palette", "palette",
        "The command palette: pause, refresh, the refresh interval, help, the evidence report.",
        show=False, priority=True),
    Key("leave-field", "escape", "leave_field", "leave field",
        "Leave a text field (the what-if controls), so the console's keys work again.",
        display="Esc"),
    Key("runbook", "g", "runbook", "runbook",
        "The runbook screen: every stage of the seat swap with its status, evidence and what "
        "it needs; Enter runs the next stage, fit to release (plan, then confirm); at the "
        "decision it offers promote or keep.", footer_rank=2),
    Key("node.hold", "H", "hold", "hold",
        "Hold the seat: ask TTL and reason, show the plan, then stop the timers and silence "
        "the seat's endpoint as a lease.", footer_rank=4),
    Key("node.release", "U", "release", "release",
        "Release the hold: show the plan, then restart the stopped timers and expire the "
        "silence.", footer_rank=9),
    Key("node.build-backport", "B", "build_backport", "build",
        "Build the profile's backport image (a patched file over a base pinned by digest) "
        "after showing the plan.", footer_rank=6),
    Key("node.swap", "S", "swap", "swap",
        "Swap the seat to the candidate (stops the resident): the plan, then type the seat's "
        "name to go on.", footer_rank=5),
    Key("node.restore", "R", "restore", "restore",
        "Restore the resident in the seat and release the hold, after showing the plan.",
        footer_rank=5),
    Key("node.probe", "P", "probe", "probe",
        "Probe the seat: preflight (needs a hold), show the plan, then send the probe's load "
        "with a live panel; x stops it.", footer_rank=3),
    Key("node.compare", "c", "compare", "compare",
        "Compare the resident and the candidate (bracketed A/B legs, one hold): the plan with "
        "its cost, then type the seat's name; the log shows the run.", footer_rank=10),
    Key("node.promote", "M", "promote", "promote",
        "Promote the candidate that holds the seat to resident (needs a hold and a "
        "PROMOTE-ABLE decision): the plan, then type the seat's name.", footer_rank=12),
    Key("node.promote-undo", "Z", "promote_undo", "undo promote",
        "Undo the last promote: the previous resident back in the seat (needs a hold): the "
        "plan, then type the seat's name.", footer_rank=13),
    Key("evidence", "e", "evidence", "evidence",
        "The evidence report of the newest comparison, else probe run (read-only).",
        footer_rank=11),
)
"""The main screen's keys, in the order of the footer and the help screen."""

FLEET_KEYS: tuple[Key, ...] = (
    Key("fleet.filter", "slash", "filter", "filter",
        "Filter the rows: type part of a node, seat or state (Esc clears it).", display="/"),
    Key("fleet.clear_filter", "escape", "clear_filter", "clear filter",
        "Clear the filter and show every row.", show=False, display="Esc"),
    Key("fleet.open_console", "a", "open_console", "open console",
        "Open the selected seat's own console over SSH (read-only when the fleet screen is "
        "--readonly); the fleet screen comes back when it quits."),
    Key("fleet.refresh", "r", "refresh_now", "refresh",
        "Query Prometheus and Alertmanager now (the next refresh is timed from it)."),
    Key("fleet.help", "question_mark", "help", "help",
        "This help: every key of the fleet screen. Enter on a row: that seat's last hour.",
        display="?"),
    Key("fleet.quit", "q", "quit", "quit", "Quit the fleet screen; nothing on the nodes changes."),
)
"""The fleet screen's keys (``seat-console fleet``), in the order of its footer and help;
remapped by the same ``[keys]`` table of the profile, by id."""

FLEET_DETAIL_KEYS: tuple[Key, ...] = (
    Key("fleet.detail.back", "escape,q,enter", "dismiss", "back",
        "Back from a seat's last hour to the fleet table."),
)
"""The keys of the fleet's seat detail (a modal screen over the fleet table)."""

TABLES: tuple[tuple[Key, ...], ...] = (KEYS, FLEET_KEYS, FLEET_DETAIL_KEYS)
"""Every screen's key table: an id of any of them may be remapped in a profile's ``[keys]``."""


def bindings(keys: Iterable[Key] = KEYS) -> list[BindingType]:
    """The Textual bindings of ``keys`` (the app's ``BINDINGS``)."""
    return [k.binding() for k in keys]


def is_node_action(binding: Binding) -> bool:
    """Whether ``binding`` changes the node (its id starts with :data:`NODE_ACTION_PREFIX`)."""
    return bool(binding.id and binding.id.startswith(NODE_ACTION_PREFIX))


def filter_action_bindings(bindings: Iterable[BindingType], readonly: bool) -> list[BindingType]:
    """The bindings to offer: all of them, or under ``readonly`` all but node actions.

    ``bindings``: :class:`Binding` objects or Textual's ``(key, action, description)`` tuples
    (tuples have no id, so they are never node actions).
    """
    if not readonly:
        return list(bindings)
    return [b for b in bindings if not (isinstance(b, Binding) and is_node_action(b))]


def node_actions(bindings: Iterable[BindingType]) -> set[str]:
    """The action names of the node-changing bindings among ``bindings``."""
    return {b.action for b in bindings if isinstance(b, Binding) and is_node_action(b)}


def node_action_of_key(bindings: Iterable[BindingType], key: str) -> Binding | None:
    """The node-changing binding among ``bindings`` that ``key`` (Textual's key name, e.g.
    ``"H"`` or ``"ctrl+r"``) would run, or ``None``: what ``--readonly`` refused, to say so."""
    for b in bindings:
        if isinstance(b, Binding) and is_node_action(b) and key in (
                k.strip() for k in b.key.split(",")):
            return b
    return None


def remapped(bindings: Iterable[BindingType], keymap: Mapping[str, str]) -> list[BindingType]:
    """``bindings`` with the keys ``keymap`` (binding id → key(s)) gives them, as Textual's
    keymap applies them (the key's on-screen form recomputed)."""
    out: list[BindingType] = []
    for b in bindings:
        if isinstance(b, Binding) and b.id in keymap:
            b = replace(b, key=keymap[b.id], key_display=None)
        out.append(b)
    return out


def help_rows(bindings: Iterable[BindingType], readonly: bool,
              display: object) -> list[tuple[str, str, str]]:
    """``(keys, label, sentence)`` per action offered (node actions left out under
    ``readonly``). ``display(binding) -> str`` writes a key as the screen shows it (the app's
    ``get_key_display``: a remapped key shows as remapped). Keys of one action are joined with
    " / ", and so are the actions of one key (p: pause / resume), whose sentences then each
    start with their label ("pause: …  ·  resume: …"). A sentence ends with the
    binding's id, ``[keys: node.hold]`` — what the profile's ``[keys]`` table remaps by."""
    rows: dict[str, tuple[list[str], str, str]] = {}
    ids: dict[str, list[str]] = {}
    for b in filter_action_bindings(bindings, readonly):
        if not isinstance(b, Binding):
            continue
        keys, _, _ = rows.setdefault(b.action, ([], b.description or b.action,
                                                b.tooltip or b.description or b.action))
        shown = display(b)  # type: ignore[operator]
        if shown not in keys:
            keys.append(shown)
        if b.id and b.id not in ids.setdefault(b.action, []):
            ids[b.action].append(b.id)
    rows = {a: (k, label, f"{said} [keys: {', '.join(ids[a])}]" if ids.get(a) else said)
            for a, (k, label, said) in rows.items()}
    merged: dict[str, tuple[list[str], list[tuple[str, str]]]] = {}
    for keys, label, sentence in rows.values():
        labels, sentences = merged.setdefault(" / ".join(keys), ([], []))
        labels.append(label)
        if sentence not in (s for _l, s in sentences):
            sentences.append((label, sentence))
    # one key's actions each say which they are ("pause: …  ·  resume: …"): run together,
    # the trial read "… ages keep counting. [keys: toggle-pause] Start reading again …"
    return [(k, " / ".join(ls), ss[0][1] if len(ss) == 1
             else "  ·  ".join(f"{lab}: {said}" for lab, said in ss))
            for k, (ls, ss) in merged.items()]


PANEL_FOOTER_RANKS: dict[str, int] = {"app.open_detail": 14}
"""Footer ranks of the focused panel's own bindings (not in :data:`KEYS`): "⏎ details" goes
first when narrow (Enter still opens the detail view; the help says so)."""


def footer_drop_order(keys: Iterable[Key] = KEYS) -> list[str]:
    """Actions the footer may leave out when narrow, the first to go first (highest
    ``footer_rank`` first, :data:`PANEL_FOOTER_RANKS` included; rank 0 is never left out).
    At 80 columns the viewing keys (details, pause, refresh, evidence) go before the
    runbook's action keys: the footer offered two action keys there (issue 30)."""
    ranked = sorted([*((k.action, k.footer_rank) for k in keys if k.footer_rank > 0),
                     *PANEL_FOOTER_RANKS.items()], key=lambda k: -k[1])
    out: list[str] = []
    for action, _rank in ranked:
        if action not in out:
            out.append(action)
    return out


def readme_rows(keys: Iterable[Key] = KEYS) -> list[str]:
    """README's key table rows: ``| key | binding id | what it does |`` per key (node keys
    say so)."""
    rows = []
    for k in keys:
        shown = ", ".join(_readme_key(part) for part in k.key.split(","))
        note = " Not under `--readonly`." if k.node else ""
        rows.append(f"| `{shown}` | `{k.id}` | {k.help}{note} |")
    return rows


def _readme_key(key: str) -> str:
    return {"question_mark": "?", "escape": "Esc", "ctrl+p": "Ctrl-P", "ctrl+q": "Ctrl-Q",
            "slash": "/", "enter": "Enter"}.get(key.strip(), key.strip())


class KeymapError(ProfileError):
    """The profile's ``[keys]`` names an unknown binding id or puts two on one key."""


def check_keymap(keymap: Mapping[str, str], source: str,
                 keys: Iterable[Key] = KEYS) -> dict[str, str]:
    """The profile's ``[keys]`` (binding id → key(s), comma-separated) checked against ``keys``
    (one screen's table: :data:`KEYS` or :data:`FLEET_KEYS`).

    Returns the entries for ``keys``' ids, as Textual's ``App.set_keymap`` takes them. Raises
    :class:`KeymapError` naming ``source`` (the profile file) for an id in no table of
    :data:`TABLES` (listing the ids) or for two actions of this screen on one key (naming
    both); ``p`` for pause and resume is one action pair, not a clash."""
    table = {k.id: k for k in keys}
    known = {k.id for t in TABLES for k in t} | set(table)
    unknown = sorted(set(keymap) - known)
    if unknown:
        raise KeymapError(f"{source}: [keys] {', '.join(repr(u) for u in unknown)}: no such key "
                          f"binding; the ids are {', '.join(sorted(known))}")
    owner: dict[str, str] = {}
    pair = {"pause", "resume"}
    for k in table.values():
        chosen = keymap.get(k.id, k.key)
        for one in (s.strip() for s in chosen.split(",")):
            if not one:
                raise KeymapError(f"{source}: [keys] {k.id!r} = {chosen!r}: an empty key; "
                                  "write e.g. \"ctrl+h\"")
            other = owner.get(one)
            if other is not None and other != k.action and not {other, k.action} <= pair:
                raise KeymapError(f"{source}: [keys] key {one!r} is bound to both {other!r} and "
                                  f"{k.action!r}; give one of them another key")
            owner[one] = k.action
    return {i: v for i, v in keymap.items() if i in table}


__all__ = ["FLEET_DETAIL_KEYS", "FLEET_KEYS", "KEYS", "NODE_ACTION_PREFIX", "TABLES", "Key",
           "KeymapError", "bindings", "check_keymap", "PANEL_FOOTER_RANKS",
           "filter_action_bindings", "footer_drop_order", "help_rows", "is_node_action",
           "node_action_of_key", "node_actions", "readme_rows", "remapped"]
