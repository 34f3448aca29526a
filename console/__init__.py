"""Seat Console (imported as ``seat_console``).

Its first act: when this process's entry is the console, Ctrl-C is held from here on, never
lost in an import (:mod:`seat_console.core.interrupt`); in any other process nothing changes.
"""

from seat_console.core import interrupt as _interrupt

_interrupt.hold_if_entry()
