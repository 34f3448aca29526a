"""The Textual screens of Seat Console."""
