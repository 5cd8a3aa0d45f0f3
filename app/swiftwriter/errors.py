"""One exception type for mistakes a user can fix; the CLI and the app show its message alone."""


class UserError(Exception):
    """Bad input or a missing resource: shown as one clear line, never as a traceback."""
