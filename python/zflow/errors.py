"""Exceptions for failed zflow calls, named and coded as TensorFlow's.

Every error the service reports arrives as a ``Status {code, message}``
with TensorFlow's canonical codes; it is raised as the subclass of
:class:`OpError` for its code, carrying the service's message unchanged::

    try:
        sess.run("y:0", feed_dict={"x:0": [1.0, 2.0, 3.0]})
    except zflow.errors.InvalidArgumentError as e:
        print(e.code, e.message)   # 3 Cannot feed value of shape [3] ...
"""

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """A failed zflow operation: ``code`` (TensorFlow's canonical code) and
    ``message`` (the service's text, unchanged). ``node_def`` and ``op`` are
    kept for TensorFlow compatibility and are always None here."""

    code = UNKNOWN

    def __init__(self, message, code=None):
        super().__init__(message)
        self._message = message
        if code is not None:
            self.code = code

    @property
    def message(self):
        return self._message

    @property
    def error_code(self):
        return self.code

    @property
    def node_def(self):
        return None

    @property
    def op(self):
        return None

    def __str__(self):
        return self._message


def _make(name, code, doc):
    def __init__(self, message):
        OpError.__init__(self, message, code)

    return type(name, (OpError,), {"code": code, "__init__": __init__, "__doc__": doc})


CancelledError = _make("CancelledError", CANCELLED, "The operation was cancelled.")
UnknownError = _make("UnknownError", UNKNOWN, "An unknown error.")
InvalidArgumentError = _make("InvalidArgumentError", INVALID_ARGUMENT,
                             "An argument was invalid (a feed's shape or dtype, a graph, ...).")
DeadlineExceededError = _make("DeadlineExceededError", DEADLINE_EXCEEDED,
                              "A deadline passed before the operation completed.")
NotFoundError = _make("NotFoundError", NOT_FOUND, "Something named was not found.")
AlreadyExistsError = _make("AlreadyExistsError", ALREADY_EXISTS, "Something already exists.")
PermissionDeniedError = _make("PermissionDeniedError", PERMISSION_DENIED,
                              "The caller may not run the operation.")
ResourceExhaustedError = _make("ResourceExhaustedError", RESOURCE_EXHAUSTED,
                               "A resource or limit was exhausted.")
FailedPreconditionError = _make("FailedPreconditionError", FAILED_PRECONDITION,
                                "The system is not in the state the operation needs.")
AbortedError = _make("AbortedError", ABORTED, "The operation was aborted.")
OutOfRangeError = _make("OutOfRangeError", OUT_OF_RANGE, "An operation went past a valid range.")
UnimplementedError = _make("UnimplementedError", UNIMPLEMENTED,
                           "The operation is not implemented or supported.")
InternalError = _make("InternalError", INTERNAL, "An internal invariant was broken.")
UnavailableError = _make("UnavailableError", UNAVAILABLE,
                         "The service (or a process of it) is unavailable.")
DataLossError = _make("DataLossError", DATA_LOSS, "Unrecoverable data loss or corruption.")
UnauthenticatedError = _make("UnauthenticatedError", UNAUTHENTICATED,
                             "The request lacks valid credentials.")

_BY_CODE = {
    cls.code: cls
    for cls in (CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
                NotFoundError, AlreadyExistsError, PermissionDeniedError,
                ResourceExhaustedError, FailedPreconditionError, AbortedError, OutOfRangeError,
                UnimplementedError, InternalError, UnavailableError, DataLossError,
                UnauthenticatedError)
}


def exception_type_from_error_code(code):
    """The OpError subclass for a canonical code (UnknownError for codes
    outside TensorFlow's set)."""
    return _BY_CODE.get(code, UnknownError)


def error_code_from_exception_type(cls):
    return cls.code


def from_status(code, message):
    """The exception for a service Status (code != 0)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return OpError(message, code)
    return cls(message)


__all__ = ["OpError", "from_status", "exception_type_from_error_code",
           "error_code_from_exception_type"] + [c.__name__ for c in _BY_CODE.values()]
