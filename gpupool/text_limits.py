"""How gpupool refuses a text longer than its field takes, in one wording wherever it is said:
``at most 400 characters, not 512``. The API's fields, the pages' forms and the models' own
checks say it (``api.errors.word_length_refusals`` makes it the message of every text field's
length bound, with Django's validator filling in the numbers), and so does the command-line
client before it sends a request. Stdlib only: the client reaches it without Django."""

from __future__ import annotations

# Django's ``MaxLengthValidator`` fills in ``limit_value`` and ``show_value`` (the length sent).
TOO_LONG = "at most %(limit_value)d characters, not %(show_value)d"


def too_long(limit: int, length: int) -> str:
    """The refusal of a text of ``length`` characters where at most ``limit`` are taken."""
    return TOO_LONG % {"limit_value": limit, "show_value": length}
