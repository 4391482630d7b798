"""The one exception the commands raise for the user's mistakes."""


class UsageError(Exception):
    """A problem with the command line or the environment, reported without a traceback."""
