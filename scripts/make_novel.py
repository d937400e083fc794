"""Write Jane Austen's *Pride and Prejudice* as plain text to ``dlnotes/datafiles``.

Source:  the ``prideprejudice`` character vector (one element per line) of the
         R package janeaustenr (text from Project Gutenberg), installed by the
         Debian package ``r-cran-janeaustenr``. The data sits in R's lazy-load
         database /usr/lib/R/site-library/janeaustenr/data/Rdata.{rdx,rdb}:
         the .rdx index (a gzipped RDS file) gives each object's byte offset and
         length in the .rdb file; each .rdb entry is a 4-byte big-endian
         uncompressed length followed by a zlib stream of R-serialized data,
         which the PyPI package ``rdata`` parses.
Licence: the novel (1813) is in the public domain; janeaustenr is MIT-licensed.
Output:  UTF-8 text, lines joined with "\\n", trailing whitespace stripped,
         ending with a single newline: 13030 lines, 684768 bytes, pure ASCII.
Rerun:   apt-get install r-cran-janeaustenr && pip install rdata
         python scripts/make_novel.py [--out PATH]
"""

import argparse
import bz2
import lzma
import os
import struct
import zlib

import rdata

DATA_DB = "/usr/lib/R/site-library/janeaustenr/data/Rdata"
DEFAULT_OUT = os.path.join(os.path.dirname(__file__), "..", "dlnotes", "datafiles", "pride_and_prejudice.txt")
DECOMPRESS = {b"Z": zlib.decompress, b"2": bz2.decompress, b"X": lzma.decompress, b"0": bytes}


def read_lazyload(db, name):
    """Return object `name` from the R lazy-load database `db`.rdx/.rdb."""
    if not os.path.exists(db + ".rdx"):
        raise SystemExit(f"error: {db}.rdx not found; install it with `apt-get install r-cran-janeaustenr`")
    index = rdata.read_rds(db + ".rdx")
    offset, length = (int(v) for v in index["variables"][name])
    with open(db + ".rdb", "rb") as f:
        f.seek(offset)
        blob = f.read(length)
    size = struct.unpack(">I", blob[:4])[0]
    if int(index["compressed"][0]) == 1:  # compress=TRUE: zlib, no type byte
        data = zlib.decompress(blob[4:])
    else:  # compress=2/3: type byte after the length
        data = DECOMPRESS[blob[4:5]](blob[5:])
    if len(data) != size:
        raise ValueError(f"{name}: expected {size} bytes, got {len(data)}")
    return rdata.conversion.convert(rdata.parser.parse_data(data, extension=".rds"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="output .txt path")
    args = parser.parse_args(argv)

    lines = ["" if line is None else str(line).rstrip() for line in read_lazyload(DATA_DB, "prideprejudice")]
    text = "\n".join(lines).strip("\n") + "\n"
    text.encode("utf-8")  # fails loudly on unpaired surrogates or similar
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print(f"{len(lines)} lines, {len(text)} characters")
    print(f"wrote {os.path.normpath(args.out)} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
