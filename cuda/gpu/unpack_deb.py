#!/usr/bin/env python3
"""Unpacks a Debian .deb (an ar archive holding data.tar.*) into a directory, like dpkg -x.

For machines without dpkg-deb. Usage: unpack_deb.py FILE.deb DEST
"""
import io
import sys
import tarfile


def members(deb):
    with open(deb, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            raise SystemExit(f"{deb}: not an ar archive")
        while True:
            header = f.read(60)
            if len(header) < 60:
                return
            name = header[:16].decode().strip().rstrip("/")
            size = int(header[48:58].decode().strip())
            data = f.read(size)
            if size % 2:
                f.read(1)
            yield name, data


def main():
    deb, dest = sys.argv[1], sys.argv[2]
    for name, data in members(deb):
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                tar.extractall(dest)
            return
    raise SystemExit(f"{deb}: no data.tar member")


if __name__ == "__main__":
    main()
