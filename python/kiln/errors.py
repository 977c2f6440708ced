"""kiln.errors: kiln's failures as Python exceptions. Every exception
carries kiln's own message (naming the op, the shapes and dtypes); the
class follows the kiln_status of calls that return one:

  KILN_ERR_INVALID      -> InvalidArgumentError (also a ValueError)
  KILN_ERR_NOMEM        -> OutOfMemoryError     (also a MemoryError)
  KILN_ERR_IO           -> KilnIOError          (also an OSError)
  KILN_ERR_FORMAT       -> FormatError          (also a ValueError)
  KILN_ERR_STATE        -> StateError
  KILN_ERR_UNSUPPORTED  -> UnsupportedError     (also a NotImplementedError)

Calls that return NULL are classified by kiln_last_status()."""


class KilnError(RuntimeError):
    """Base of every error kiln reports."""


class InvalidArgumentError(KilnError, ValueError):
    pass


class OutOfMemoryError(KilnError, MemoryError):
    pass


class KilnIOError(KilnError, OSError):
    pass


class FormatError(KilnError, ValueError):
    pass


class StateError(KilnError):
    pass


class UnsupportedError(KilnError, NotImplementedError):
    pass


_BY_STATUS = {-1: InvalidArgumentError, -2: OutOfMemoryError, -3: KilnIOError, -4: FormatError,
              -5: StateError, -6: UnsupportedError}


def for_status(status):
    """The exception class of a negative kiln_status."""
    return _BY_STATUS.get(status, KilnError)
