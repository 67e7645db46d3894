"""Fetch the public datasets rdpgan uses and verify them against recorded SHA-256 hashes.

    python scripts/download_data.py [--root DIR] [--dataset adult|cervical|creditcard|all]
    python scripts/download_data.py --verify [--root DIR]      # offline: only check hashes

Data root: --root, else env RDPGAN_DATA_DIR, else ./data. Files already present with the right
hash are skipped; a file present with a wrong hash is reported and left alone (delete it to
re-download). Downloads go to a temporary file in the destination folder, are verified, and only
then renamed into place, so an interrupted or corrupted download never looks like a good file.
The hashes are those recorded in ../shared/data/*/PROVENANCE.md (see data/README.md).

Credit card: the full data (284,807 rows) needs a Kaggle account (mlg-ulb/creditcardfraud) or
OpenML (data id 1597) and is not fetched. What is fetched is the 5,412-row real subsample the
results here were made on, from the GitHub repository recorded in PROVENANCE.md at the recorded
commit; its CSV bytes are verified, then it is stored gzip-compressed.

Standard library only. Errors are one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

PROG = "download_data.py"
UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"
CC_REPO = "Bhavyasoni01/cc-fraud-detection"
CC_COMMIT = "64af6d56d617c7e2feaaefd053d902adf97aa96b"


@dataclass(frozen=True)
class Remote:
    """One file: where it goes under the data root, where it comes from, and its hash."""

    path: str
    url: str
    sha256: str
    # For files stored gzip-compressed: the SHA-256 of the uncompressed bytes (what the URL
    # serves). The compressed bytes are reproducible only with GNU `gzip -9 -n`.
    content_sha256: str | None = None


DATASETS: dict[str, list[Remote]] = {
    "adult": [
        Remote(
            "adult/adult.data",
            f"{UCI}/adult/adult.data",
            "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
        ),
        Remote(
            "adult/adult.names",
            f"{UCI}/adult/adult.names",
            "c248284c0b5de30c9e1958d6cdd168a34a654758b620e68f46aefa83fc0a576a",
        ),
        Remote(
            "adult/adult.test",
            f"{UCI}/adult/adult.test",
            "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
        ),
    ],
    "cervical": [
        Remote(
            "cervical/risk_factors_cervical_cancer.csv",
            f"{UCI}/00383/risk_factors_cervical_cancer.csv",
            "8df193ad5c9ff4288fb4c401eef70dcd2cbda404ce7f82ac74c68cfc960ab063",
        ),
    ],
    "creditcard": [
        Remote(
            "creditcard/creditcard_sample.csv.gz",
            f"https://raw.githubusercontent.com/{CC_REPO}/{CC_COMMIT}/creditcard_sample.csv",
            "8e9c3acb0cf540a9affd970b6a6f09372ca95cf9ddca4dd098de1c2a600cc1ff",
            content_sha256="03f9faa6d17e910ee343bdf4c211c6135bd622d8ae4aa6eacb246309ddcc0e95",
        ),
    ],
}

CREDITCARD_NOTE = (
    "creditcard: fetching the 5,412-row real SUBSAMPLE (all 492 frauds + 4,920 non-frauds) from "
    f"github.com/{CC_REPO} @ {CC_COMMIT[:12]}. The full 284,807-row data needs a Kaggle account "
    "(mlg-ulb/creditcardfraud) or OpenML data id 1597; put it at "
    "<root>/creditcard/creditcard.csv and run with dataset.file=creditcard/creditcard.csv."
)


class Failure(Exception):
    """An expected failure: reported as one line, exit code 2."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_gunzip(path: Path) -> str | None:
    """SHA-256 of a gzip file's uncompressed bytes, or None if it is not valid gzip."""
    h = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except (OSError, EOFError):
        return None
    return h.hexdigest()


def check_present(remote: Remote, dest: Path) -> tuple[bool, str]:
    """(ok, detail) for a file that exists."""
    if sha256_file(dest) == remote.sha256:
        return True, "sha256 ok"
    if remote.content_sha256 and sha256_gunzip(dest) == remote.content_sha256:
        return True, "uncompressed sha256 ok (gzip bytes differ from the recorded copy)"
    return False, "sha256 mismatch"


def fetch(url: str, out: Path, timeout: float) -> str:
    """Stream url into out; return the SHA-256 of the bytes. Raise Failure on network errors."""
    h = hashlib.sha256()
    request = urllib.request.Request(url, headers={"User-Agent": "rdpgan-download/1"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp, open(out, "wb") as fh:
            for block in iter(lambda: resp.read(1 << 16), b""):
                h.update(block)
                fh.write(block)
    except urllib.error.HTTPError as exc:
        raise Failure(f"HTTP {exc.code} {exc.reason} fetching {url}") from None
    except urllib.error.URLError as exc:
        raise Failure(f"network error fetching {url}: {exc.reason} (no internet access?)") from None
    except (TimeoutError, OSError) as exc:
        raise Failure(
            f"network error fetching {url}: {exc or type(exc).__name__} (no internet access?)"
        ) from None
    return h.hexdigest()


def gzip_like_gnu(src: Path, dst: Path, want_sha256: str) -> bool:
    """Write src gzip-compressed (level 9, no name, mtime 0) to dst.

    Returns True if the bytes reproduce want_sha256 (the recorded `gzip -9 -n` output). Python's
    zlib is tried first; its deflate output differs from GNU gzip's, so if a `gzip` program is
    on PATH it is used to get the identical bytes. Either way the content is the same.
    """
    data = src.read_bytes()
    dst.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    if sha256_file(dst) == want_sha256:
        return True
    gz = shutil.which("gzip")
    if gz:
        try:
            with open(src, "rb") as fin, open(dst, "wb") as fout:
                subprocess.run([gz, "-9", "-n", "-c"], stdin=fin, stdout=fout, check=True)
            if sha256_file(dst) == want_sha256:
                return True
        except (OSError, subprocess.CalledProcessError):
            pass
        dst.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    return False


def download(remote: Remote, dest: Path, timeout: float) -> str:
    """Fetch, verify and atomically install one file; return a status detail."""
    created = not dest.parent.exists()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp_paths: list[Path] = []

    def tmp(suffix: str) -> Path:
        fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix, dir=dest.parent)
        os.close(fd)
        tmp_paths.append(Path(name))
        return Path(name)

    try:
        raw = tmp(".part")
        got = fetch(remote.url, raw, timeout)
        want = remote.content_sha256 or remote.sha256
        if got != want:
            raise Failure(
                f"sha256 mismatch for {remote.url}: got {got}, expected {want}; download deleted"
            )
        final, detail = raw, "downloaded, sha256 ok"
        if remote.content_sha256:
            final = tmp(".gz.part")
            if gzip_like_gnu(raw, final, remote.sha256):
                detail = "downloaded, CSV sha256 ok, gzip -9 -n bytes reproduce the recorded sha256"
            else:
                detail = (
                    "downloaded, CSV sha256 ok; compressed with Python's gzip, whose bytes differ "
                    "from the recorded .gz sha256 (content identical)"
                )
        os.replace(final, dest)
        return detail
    finally:
        for p in tmp_paths:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        if created:  # leave no empty folder behind after a failed download
            with contextlib.suppress(OSError):
                dest.parent.rmdir()


def resolve_root(cli_root: str | None) -> Path:
    if cli_root:
        return Path(cli_root)
    env = os.environ.get("RDPGAN_DATA_DIR")
    return Path(env) if env else Path("data")


def run(args: argparse.Namespace) -> int:
    root = resolve_root(args.root)
    names = list(DATASETS) if args.dataset == "all" else [args.dataset]
    bad = 0
    for name in names:
        if name == "creditcard" and not args.verify:
            print(CREDITCARD_NOTE)
        for remote in DATASETS[name]:
            dest = root / remote.path
            if dest.exists():
                ok, detail = check_present(remote, dest)
                if ok:
                    print(f"ok       {dest}: {detail}" + ("" if args.verify else " (skipped)"))
                    continue
                bad += 1
                print(
                    f"{PROG}: error: {dest} exists but its sha256 does not match "
                    f"{remote.sha256}; delete it to re-download",
                    file=sys.stderr,
                )
                continue
            if args.verify:
                bad += 1
                print(f"{PROG}: error: {dest} is missing", file=sys.stderr)
                continue
            print(f"fetching {remote.url}", flush=True)
            detail = download(remote, dest, args.timeout)  # Failure propagates: stop at once
            print(f"ok       {dest}: {detail}")
    return 2 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Download and verify rdpgan's public datasets."
    )
    parser.add_argument("--root", help="data root (default: $RDPGAN_DATA_DIR, else ./data)")
    parser.add_argument(
        "--dataset", choices=[*DATASETS, "all"], default="all", help="which dataset (all)"
    )
    parser.add_argument(
        "--verify", action="store_true", help="only check hashes of files already present"
    )
    parser.add_argument(
        "--timeout", type=float, default=15.0, help="network timeout in seconds (15)"
    )
    args = parser.parse_args(argv)
    try:
        return run(args)
    except Failure as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: error: interrupted", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
