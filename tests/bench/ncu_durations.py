"""Reads `ncu --metrics gpu__time_duration.sum --csv` output on stdin and prints one line: TAG, then
for each kernel name (in the order first seen) the median duration in us and the number of launches.
ncu locks the SM clock (--clock-control base, its default), so two trees compared this way differ
by their kernels alone, not by the clock or power state of the moment (tests/bench/ab.sh
--bench prefill-ncu). A kernel's name is shortened to what comes between PREFIX and its `_tp` (the
model, dots spelled as underscores).

Usage: ncu ... --csv python3 ... | python3 tests/bench/ncu_durations.py TAG [PREFIX]
   PREFIX: the part of the kernel names to drop before the model (none by default)
"""
import csv
import statistics
import sys

SCALE = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
         "s": 1e6, "second": 1e6}


def durations(lines):
    """{kernel name: [us, ...]} from ncu's CSV rows of gpu__time_duration.sum, in launch order."""
    head, out = None, {}
    for row in csv.reader(lines):
        if head is None:
            if "Kernel Name" in row and "Metric Value" in row:
                head = {name: i for i, name in enumerate(row)}
            continue
        if len(row) != len(head) or row[head["Metric Name"]] != "gpu__time_duration.sum":
            continue
        unit = row[head["Metric Unit"]]
        if unit not in SCALE:
            raise SystemExit(f"ncu_durations: unit {unit!r} not known")
        value = float(row[head["Metric Value"]].replace(",", "")) * SCALE[unit]
        out.setdefault(row[head["Kernel Name"]], []).append(value)
    return out


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    tag = sys.argv[1]
    prefix = sys.argv[2] if len(sys.argv) == 3 else ""
    d = durations(sys.stdin)
    if not d:
        print(f"{tag}: no durations (ncu failed or matched no kernel)")
        sys.exit(1)
    parts = []
    for name, us in d.items():
        short = name[len(prefix):] if name.startswith(prefix) else name
        parts.append(f"{short.split('_tp')[0]} {statistics.median(us):.1f} us ({len(us)})")
    print(f"{tag}: ncu " + " | ".join(parts), flush=True)


if __name__ == "__main__":
    main()
