"""Errors a user can fix. Their message is one line that names the field and the problem.

Every face maps ``InputError`` to its own way of saying no: a one-line message and exit code 2
on the CLI, a 4xx on the API. Anything else escaping is a bug.
"""


class InputError(ValueError):
    """Bad input: unknown id, impossible layout, malformed file, unmeetable request."""
