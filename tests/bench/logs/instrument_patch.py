# The text patcher of the throwaway instruments in this folder (imported by them: they run as
# `python3 tests/bench/logs/NAME.py` from the tree root of a copy, so this folder is on sys.path).
# Each (old, new) pair replaces old, which must occur exactly once in the file, by new.
def patch(p, pairs):
    s = open(p).read()
    for a, b in pairs:
        assert s.count(a) == 1, (p, a)
        s = s.replace(a, b)
    open(p, 'w').write(s)
