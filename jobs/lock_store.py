"""Create-if-absent on S3 through Hadoop's S3A, for the run lock (jobs/locks.py).

S3A's plain `create(path, overwrite=false)` checks that the object is absent and later puts it: two
runs can both pass the check, and the second put silently replaces the first. Atomic only is a put
that the store itself refuses when the object exists (If-None-Match: *), which S3A sends when the
create is built with `fs.option.create.conditional.overwrite`; the store answers 412 when the object
exists, and S3A raises RemoteFileChangedException when the stream is closed.

Not every S3 API store honours that header. Some return 501, older ones ignore it and overwrite, and
S3A refuses the option when `fs.s3a.create.conditional.enabled` is false (the setting for stores
without conditional writes). `require_conditional_writes` finds out which, with an object of the session's
own, when the session is built (jobs/locks.py prove_lock_store): a store that would let two runs in at once
makes the run refuse before it writes anything.
"""

from __future__ import annotations

from py4j.protocol import Py4JJavaError

from jobs.object_store import root_cause

CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite"
# Java exceptions that mean "the object exists": 412 at close, or S3A's own check at create.
_EXISTS = ("RemoteFileChangedException", "FileAlreadyExistsException")
EXIT_FAILED = 1


class UnguardedStore(SystemExit):
    """The store cannot refuse a second create of one object, or cannot be written at all: the run lock
    would not exclude anyone, so the run stops before it writes anything (exit 1; changing the store or its
    settings is the remedy, not a retry)."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_FAILED)
        self.message = message

    def __str__(self) -> str:
        return self.message


def _java_class(error: Py4JJavaError) -> str:
    return str(error.java_exception.getClass().getName())


def _first_line(error: Py4JJavaError) -> str:
    message = str(error.java_exception.getMessage() or "")
    return message.splitlines()[0] if message else _java_class(error)


def _put(fs, path, body: bytes) -> None:
    """One conditional put: Py4JJavaError when it is refused (or fails)."""
    stream = fs.createFile(path).overwrite(False).must(CONDITIONAL_CREATE, True).build()
    try:
        stream.write(bytearray(body))
    finally:
        stream.close()  # the put happens here, and so does a 412


def create_if_absent(fs, path, body: bytes) -> bool:
    """True when this call created the object; False when it already existed."""
    try:
        _put(fs, path, body)
    except Py4JJavaError as error:
        if any(name in _java_class(error) for name in _EXISTS):
            return False
        raise
    return True


def require_conditional_writes(fs, lock, run_id: str) -> None:
    """Puts an object of this run's own beside the lock twice, conditionally: the second put must be
    refused. Raises UnguardedStore, saying why, when it is not, or when the first put fails."""
    probe = lock.getParent().suffix(f"/{run_id}.conditional-write-probe")
    where = f"{probe.toUri().getScheme()}://{probe.toUri().getAuthority()}"
    try:
        _put(fs, probe, b"first")
    except Py4JJavaError as error:
        if "Conditional Writes Unavailable" in _first_line(error):
            raise UnguardedStore(
                f"the run lock needs conditional writes on {where}, and fs.s3a.create.conditional.enabled is false "
                "(the setting for stores without them): two runs could hold the lock at once and corrupt the Delta "
                "tables. Nothing was changed; use a store with conditional writes (If-None-Match) and enable them"
            ) from None
        # An endpoint that answers HTTP but is not S3 passes the reachability check (S3A reads its 404s as
        # "no such object") and fails here first, as do credentials that may read but not write.
        raise UnguardedStore(
            f"cannot write the run lock to {where}: {root_cause(error.java_exception)}. Nothing was written; "
            "check that [storage.s3] endpoint is an S3 API store and that the credentials may write to the bucket"
        ) from None
    # Deleted only once written: a failed put left nothing, and a delete on a store that is not S3 fails too.
    try:
        try:
            _put(fs, probe, b"second")
        except Py4JJavaError as error:
            if any(name in _java_class(error) for name in _EXISTS):
                return  # refused as it must be: the store honours If-None-Match
            reason = _first_line(error)
        else:
            reason = "it replaced an object that existed (the If-None-Match header was ignored)"
        raise UnguardedStore(
            f"the object store at {where} does not support conditional writes: a create-if-absent of "
            f"{probe.toString()} over an existing object was not refused: {reason}. The run lock cannot exclude "
            "a second run there, and two runs at once would corrupt the Delta tables; refusing to run "
            "unguarded. Nothing was changed; use a store with conditional writes (If-None-Match: *)"
        )
    finally:
        fs.delete(probe, False)
