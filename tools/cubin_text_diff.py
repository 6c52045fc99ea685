#!/usr/bin/env python3
"""Compares the machine code (SASS bytes) of two folders of cubins, as written by
`build/dsa-jit --dump DIR`: every ELF section named .text.<function> of every cubin present in both
folders, by function name. Needs no CUDA tool: the ELF64 headers are read with struct.

usage: tools/cubin_text_diff.py BEFORE_DIR AFTER_DIR
Prints each function whose code changed, appeared or disappeared, and one summary line. Exit 0 when
both folders hold the same cubins with identical .text sections, 1 otherwise, 2 on a usage error.
"""
import os
import struct
import sys


def text_sections(path):
    """{function name: code bytes} of the .text.* sections of one ELF64 little-endian file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = []
    for i in range(shnum):
        # sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size
        name, stype, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        headers.append((name, stype, offset, size))
    strtab_off, strtab_size = headers[shstrndx][2], headers[shstrndx][3]
    strtab = data[strtab_off:strtab_off + strtab_size]
    out = {}
    for name, stype, offset, size in headers:
        sname = strtab[name:strtab.index(b"\0", name)].decode()
        if sname.startswith(".text."):
            out[sname[len(".text."):]] = data[offset:offset + size] if stype != 8 else b"\0" * size  # 8: NOBITS
    return out


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    before_dir, after_dir = argv[1], argv[2]
    before = {n for n in os.listdir(before_dir) if n.endswith(".cubin")}
    after = {n for n in os.listdir(after_dir) if n.endswith(".cubin")}
    problems = 0
    for name in sorted(before ^ after):
        print(f"{name}: only in {before_dir if name in before else after_dir}")
        problems += 1
    functions = changed = 0
    for name in sorted(before & after):
        a = text_sections(os.path.join(before_dir, name))
        b = text_sections(os.path.join(after_dir, name))
        for fn in sorted(a.keys() | b.keys()):
            functions += 1
            if fn not in b:
                print(f"{name}: {fn}: gone")
            elif fn not in a:
                print(f"{name}: {fn}: new")
            elif a[fn] != b[fn]:
                print(f"{name}: {fn}: machine code differs ({len(a[fn])} -> {len(b[fn])} bytes)")
            else:
                continue
            changed += 1
    cubins = len(before & after)
    if changed or problems:
        print(f"{changed} of {functions} kernels in {cubins} cubins differ; {problems} cubins unmatched")
        return 1
    print(f"machine code of all {functions} kernels in {cubins} cubins identical")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
