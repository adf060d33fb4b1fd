"""How many distinct kernel compilations an st corpus needs, without compiling any.

Every case's inputs are drawn and the operator API is called inside ``record_launches(run=False)``: the
kernels are specialised (traced to IR and run through the passes, which is fast) but not compiled by numba
nor run. Printed: the cases, the launches, the distinct specialisations (numba compilations on a cold
cache), and which constexpr parameters or argument types tell them apart, with the count left if a set of
them were runtime values instead.

    python benchmarks/count_compilations.py PATH/st/fia_v4.json [--explain]
"""

from __future__ import annotations

import argparse
import collections
import time

from cvtile.kernels.st_runner import corpus_launches


def specialisations(path: str):
    """(number of cases, launches, Counter of specialisation keys, Counter of error types)."""
    keys: collections.Counter = collections.Counter()
    errors: collections.Counter = collections.Counter()
    launches = 0
    n = 0
    for _, recorded in corpus_launches(path):
        n += 1
        if isinstance(recorded, Exception):   # unsupported or rejected cases launch nothing
            errors[type(recorded).__name__] += 1
            continue
        for launch in recorded:
            keys[launch.kernel.key] += 1
            launches += 1
    return n, launches, keys, errors


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--explain", action="store_true", help="the parameters that tell the specialisations apart")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    n, launches, keys, errors = specialisations(args.path)
    print(f"{args.path}: {n} cases, {launches} launches, {len(keys)} distinct compilations "
          f"(cases that launch nothing: {dict(errors)}) [{time.perf_counter() - t0:.0f} s]")
    if args.explain:
        by_source = collections.defaultdict(list)
        for key in keys:
            by_source[key[0]].append(dict((part[0], part[1:]) for part in key[1]))
        for source, parts in by_source.items():
            print(f"  kernel source {source}: {len(parts)} specialisations")
            for name in parts[0]:
                values = collections.Counter(repr(p.get(name)) for p in parts)
                if len(values) > 1:
                    print(f"    {name}: {len(values)} values")
        flags = {name for parts in by_source.values() for name in parts[0] if name.isupper()}
        left = len({(k[0], tuple(p for p in k[1] if p[0] not in flags)) for k in keys})
        print(f"  with every constexpr ({', '.join(sorted(flags))}) a runtime value: {left} compilations")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
