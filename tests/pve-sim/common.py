"""Errors shared by the simulator's modules."""


class ApiError(Exception):
    """An answer other than 200: status, message, optional param errors."""

    def __init__(self, status, message, errors=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors


class Drop(Exception):
    """Close the connection without an answer (fault 'drop')."""


def perm_denied(path, priv):
    """403 as PVE words it: Permission check failed (PATH, PRIV)."""
    return ApiError(403, "Permission check failed (%s, %s)" % (path, priv))
