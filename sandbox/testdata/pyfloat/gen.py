#!/usr/bin/env python3
"""Writes golden.jsonl: how CPython turns floats into text and divides them, for
TestFloatsAsPython (sandbox/pyfloat_test.go), which runs every expression as a plan.

Regenerate (with CPython 3.11 or later) from the repository root:

    python3 sandbox/testdata/pyfloat/gen.py > sandbox/testdata/pyfloat/golden.jsonl

Each line is a JSON object:
  expr   a Python expression that is also a valid starplan plan expression, evaluating to a str
  want   its value in CPython (absent when CPython raises)
  error  the name of the exception CPython raises (absent when it does not)
  setup  statements run before expr (optional)
  print  true when expr is a print(...) call and want is what it writes (optional)
"""
import contextlib
import io
import json
import math
import random
import sys

assert sys.version_info >= (3, 11), "z in format specs needs 3.11"


def lit(x):
    """The source text of float x in a plan and in Python."""
    if math.isnan(x):
        return "float('nan')"
    if math.isinf(x):
        return "float('inf')" if x > 0 else "-float('inf')"
    return repr(x)


def values():
    vs = [0.0, -0.0, math.inf, -math.inf, math.nan]
    for k in range(-22, 24):  # around the switch points 1e-4 and 1e16
        vs.append(float("1e%d" % k))
    vs += [-1e16, -1e-5, -1e-4, 9999999999999998.0, 1e16 - 2, 1e16 + 2, 9.999999999999999e15,
           12345678901234567.0, 1234567890123456.0, 123456789012345.0, 1234567.0, -1234567.0,
           0.0001, 0.00009999999999999999, 0.00011, 0.00012345, 0.000099, 1.5e-5,
           2.0 ** 53, 2.0 ** 53 + 2, 2.0 ** 63, 2.0 ** 64, -2.0 ** 70, 2.0 ** -1074, 2.0 ** -1022,
           5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308,
           0.1, 0.2, 0.1 + 0.2, 1 / 3, 2 / 3, -1 / 3, math.pi, math.e, math.tau, 1.5, 2.5, 0.5, 1.0,
           -1.0, 100.0, 1e22, 1e23, 0.125, 0.375, 2.675, 1.005, 0.045, 1.115, 4.35, 0.035, 1234.5,
           999.995, 9.995, 0.995, 1.25, 0.05, 5e-5, 123.456, 99.99, 19.99, 29.95, 1e-7, 1.23e-10,
           4.9406564584124654e-324, 6.02214076e23, 1.602176634e-19, 299792458.0, 0.30000000000000004]
    rnd = random.Random(25)  # many digits, across the exponent range
    for _ in range(40):
        vs.append(rnd.uniform(-1, 1) * 10.0 ** rnd.randint(-30, 30))
    for _ in range(10):  # any bit pattern
        vs.append(rnd.choice([-1, 1]) * rnd.random() * 2.0 ** rnd.randint(-1070, 1020))
    out, seen = [], set()
    for v in vs:
        key = lit(v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


# Every path that turns a float into text (strings stay out of containers: Starlark quotes them
# with double quotes, Python with single ones): X is replaced by the value's literal. TEXT is run for
# every value, MORE for every third.
TEXT = [
    "str(X)", "repr(X)", '"%s" % X', '"%r" % X', 'format(X)', 'f"{X}"', '"{}".format(X)',
    "str([X])", "json.dumps(X)", '("%" + "s") % X', '("%" + "g") % X', '"%.2f" % X', '"%g" % X',
    'f"{X:.2f}"', 'format(X, ".17g")', "str(round(X, 2))",
]
MORE = [
    'format(X, "")', 'f"{X!r}"', 'f"{X!s}"', '"{!r}".format(X)', '"{0}|{0!r}".format(X)',
    '"{v}".format(v=X)', '"v=" + str(X)', "repr([X, -X])", 'str((X,))', '"%s" % (X,)',
    'str({1: X})', '"%s" % [X]', '"{}".format([X])', 'f"{[X]}"', "json.dumps([X])",
    '("%" + "r") % X', '("%" + "f") % X', '("%" + "e") % X', '("%" + "E") % X', '("%" + "G") % X',
    '"%e" % X', '"%10.3f|" % X', '"%-12.4e|" % X', '"%+.3g" % X', '"%#.3g" % X', '"%010.2f" % X',
    '"%5.1f%%" % X', 'f"{X:,.2f}"', 'f"{X:>14}"', 'f"{X:.3%}"', 'f"{X:z.1f}"', 'format(X, ".0f")',
    'format(X, "g")', 'format(X, "n")', 'format(X, ".1e")', '"{:e}".format(X)', '"{:.3}".format(X)',
]
# Paths that fail in Python for a float that is not finite.
FINITE = ['"%d" % X', '"%i" % (X,)', '("%" + "d") % X']
# Python 3 refuses %x and %o of a float.
INT_ONLY = ['("%" + "x") % X', '("%" + "o") % X', '("%" + chr(88)) % (X,)']  # chr(88) is "X"
PRINTS = ["print(X)", "print(X, [X], sep='|')", "print({1: (X,)})"]

A = [7, -7, 7.0, -7.0, 1, 1.0, -1.0, 0.1, -0.1, 0.0, -0.0, 6.0, -6.0, 3, 2.5, 1e16, 1e308, -1e308,
     5e-324, math.inf, -math.inf, math.nan, 0.3, 1e-300, 2.0 ** 53, 10, -0.5]
B = [2.0, -2.0, 3.0, -3.0, 0.1, -0.1, 0.0, -0.0, 0, 2, -3, 1e-300, 5e-324, math.inf, -math.inf,
     math.nan, 0.7, 1e308, 0.5, -1.5]
# Statements: augmented assignment, names, mappings.
SETUPS = [
    ("x = 1.0\nx //= 0.1", "repr(x)"),
    ("x = -7.0\nx //= 2", "repr(x)"),
    ("x = 7\nx %= -3.0", "repr(x)"),
    ("x = 6.0\nx %= -3.0", "repr(x)"),
    ("xs = [1.0, 7.5]\nxs[int('1')] //= 0.1", "repr(xs)"),
    ("d = {'k': -6.0}\nd['k'] %= 3.0", "repr(d['k'])"),
    ("d = {2: 1.0}\nd[int('2')] %= -0.3", "repr(d)"),
    ("x = 1234567.0", '"%s and %r" % (x, [x])'),
    ("x = 1e16", '"%(p)s|%(p)r" % {"p": x}'),
    ("x = 1e-05", '"{a} {a!r}".format(a=x)'),
    ("x = 123456789012345.0\nf = '{}'.format", "f(x)"),
    ("x = 0.1 + 0.2\nfmt = '%s/%s'", "fmt % (x, -x)"),
    ("x = 1e308 * 10", "str(x) + ' ' + str(-x) + ' ' + str([x])"),
    ("x = 2.5\nn = 7\ny = n // x + n % x", "repr(y)"),
    ("t = 0.0\nfor i in range(10):\n    t += 0.1", 'f"{t} {t:.2f} {t!r}"'),
]


def run(setup, expr, is_print=False):
    env = {"json": json, "math": math}
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(setup, env)
            v = eval(expr, env)
    except Exception as e:  # noqa: BLE001 - the exception's name is the golden value
        return {"error": type(e).__name__}
    if is_print:
        return {"want": out.getvalue(), "print": True}
    assert isinstance(v, str), expr
    return {"want": v}


def emit(expr, setup="", is_print=False):
    rec = {"expr": expr}
    if setup:
        rec["setup"] = setup
    rec.update(run(setup, expr, is_print))
    print(json.dumps(rec, ensure_ascii=False))


def main():
    vs = values()
    for i, v in enumerate(vs):
        for t in TEXT + (MORE if i % 3 == 0 else []):
            emit(t.replace("X", lit(v)))
        if math.isfinite(v):
            for t in FINITE:
                emit(t.replace("X", lit(v)))
        else:
            emit(FINITE[0].replace("X", lit(v)))
    for v in vs[:12]:
        for t in INT_ONLY:
            emit(t.replace("X", lit(v)))
    for v in vs[::3]:
        for t in PRINTS:
            emit(t.replace("X", lit(v)), is_print=True)
    for a in A:
        for b in B:
            if not (isinstance(a, float) or isinstance(b, float)):
                continue
            for op in ("//", "%"):
                emit("repr(%s %s %s)" % (lit(a), op, lit(b)))
    for a, b in [(7, 2), (-7, 2), (7, -2), (7, 0)]:
        for op in ("//", "%"):
            emit("repr(%s %s %s)" % (a, op, b))
    for setup, expr in SETUPS:
        emit(expr, setup=setup)


if __name__ == "__main__":
    main()
