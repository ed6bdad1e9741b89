"""When `qmd update` may trust a file's status instead of reading it (REQ-INDEX-NOOP-001).

An update records, for every file it read and indexed, the file's stamp (size, modification
and change times, inode) as the scan saw it, the time the scan started, and the content hash
and title it indexed. The next update skips reading a file only when:

* its stamp is exactly the recorded one, and
* the indexed document still has the recorded hash and title (another program, such as the
  original QMD, may have rewritten the row meanwhile), and
* the recorded stamp's change time lies more than `RACY_WINDOW_NS` before the start of the scan
  that read the file. A file changed within that window might have been written again after it
  was read without its times moving (file systems keep times at a coarse granularity: 2 s on
  FAT, a clock tick elsewhere), so it is read again next time; once it has been quiet for the
  window, its stamp is trusted (git's "racily clean" rule).

Any write moves the change time (ctime), which no program can set back, so a file rewritten
with the same size and its old modification time restored is still read. What is not caught: a
file system whose clock runs more than the window behind this machine's and keeps coarse times.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.indexing import FileStamp
from domain.model import DocumentMeta

RACY_WINDOW_NS = 2_000_000_000


@dataclass(frozen=True)
class RecordedStamp:
    """A file's stamp when its content was last read, and what that content was indexed as."""

    stamp: FileStamp
    scan_started_ns: int  # the source's clock just before the scan that saw `stamp`
    hash: str
    title: str
    # the extractor version that produced an extracted file's text; "" for a file read as text
    reader: str = ""


def can_skip(
    current: FileStamp | None, recorded: RecordedStamp | None, indexed: DocumentMeta | None
) -> bool:
    """True when the file need not be read: it is still what `indexed` holds."""
    if current is None or recorded is None or indexed is None:
        return False
    if current != recorded.stamp:
        return False
    if indexed.hash != recorded.hash or indexed.title != recorded.title:
        return False
    return recorded.stamp.changed_ns < recorded.scan_started_ns - RACY_WINDOW_NS
