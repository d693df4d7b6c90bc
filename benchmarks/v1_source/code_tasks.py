"""code tasks: two buggy snippets in markdown fences, repaired by deterministic text ops,
checked in python_exec, returned as artifacts.code. The reference is the cases of the
repaired function that has the most literal test assertions (the scorer calls one
entry point)."""
import ast
from collections import defaultdict

from common import step

CHECK = '''import sys

source = sys.stdin.read()
namespace = {{}}
exec(compile(source, "solution.py", "exec"), namespace)
{checks}
sys.stdout.write(source)
'''


def fence(code):
    return f"```python\n{code}```\n"


def code_task(tid, desc, a, fix_a, b, fix_b, checks, tests):
    """fix_* = ("replace", old, new) or ("regex_replace", pattern, repl)."""
    def fix(sid, src, spec):
        op, x, y = spec
        if op == "replace":
            return step(sid, "text_transform", op="replace", text="${%s.output.artifacts.code}" % src, old=x, new=y)
        return step(sid, "text_transform", op="regex_replace", text="${%s.output.artifacts.code}" % src, pattern=x, repl=y)
    check_lines = "\n".join(f"assert {c}" for c in checks)
    steps = [
        step("extract_a", "text_transform", op="extract_code_block", language="python",
             text="Snippet A from the bug report:\n\n" + fence(a)),
        step("extract_b", "text_transform", op="extract_code_block", language="python",
             text="Snippet B from the bug report:\n\n" + fence(b)),
        fix("fix_a", "extract_a", fix_a),
        fix("fix_b", "extract_b", fix_b),
        step("join", "text_transform", op="template", text="{a}\n\n{b}",
             values={"a": "${fix_a.output.text}", "b": "${fix_b.output.text}"}),
        step("check", "python_exec", code=CHECK.format(checks=check_lines), stdin="${join.output.text}"),
        step("solution", "text_transform", op="extract_code_block", language="python",
             text="```python\n${check.output.text}```\n"),
    ]
    return {"id": tid, "desc": desc, "steps": steps, "reference": reference_from_tests(tests),
            "extra_latency": 2.0, "a": a, "b": b, "fix_a": fix_a, "fix_b": fix_b}


def reference_from_tests(tests):
    """``assert solution.f(<literals>) == <literal>`` (or ``assert [not] solution.f(...)``)
    lines as cases of the function with the most of them."""
    cases = defaultdict(list)
    for node in ast.walk(ast.parse(tests)):
        if isinstance(node, ast.Assert):
            found = _case(node.test)
            if found:
                cases[found[0]].append(found[1])
    entry_point = max(cases, key=lambda name: len(cases[name]))
    return {"entry_point": entry_point, "cases": cases[entry_point]}


def _case(test):
    expected = True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, expected = test.operand, False
    elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        try:
            expected = ast.literal_eval(test.comparators[0])
        except ValueError:
            return None
        test = test.left
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute)
            and isinstance(test.func.value, ast.Name) and test.func.value.id == "solution"):
        return None
    try:
        args = [ast.literal_eval(arg) for arg in test.args]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in test.keywords}
    except ValueError:
        return None
    return test.func.attr, {"args": args, "kwargs": kwargs, "expected": expected}


def T(name, body):
    return f"def test_{name}():\n" + "".join(f"    {line}\n" for line in body) + "\n\n"


def tasks():
    out = []
    out.append(code_task("code_mean_clamp",
        "Repair `mean(values)` (it divides by the wrong count) and `clamp(x, lo, hi)` (it compares against the wrong bound) and return the module.",
        "def mean(values):\n    return sum(values) / (len(values) - 1)\n",
        ("replace", "(len(values) - 1)", "len(values)"),
        "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > lo:\n        return hi\n    return x\n",
        ("regex_replace", r"if x > lo:", "if x > hi:"),
        ['namespace["mean"]([1, 2, 3]) == 2', 'namespace["clamp"](5, 0, 10) == 5'],
        T("mean", ["assert solution.mean([1, 2, 3, 4]) == 2.5", "assert solution.mean([7]) == 7"])
        + T("clamp", ["assert solution.clamp(5, 0, 10) == 5", "assert solution.clamp(-3, 0, 10) == 0",
                       "assert solution.clamp(42, 0, 10) == 10"])))
    out.append(code_task("code_palindrome_words",
        "Make `is_palindrome(s)` ignore case and `word_count(s)` count words separated by any whitespace.",
        "def is_palindrome(s):\n    cleaned = s.replace(\" \", \"\")\n    return cleaned == cleaned[::-1]\n",
        ("replace", 's.replace(" ", "")', 's.replace(" ", "").lower()'),
        "def word_count(s):\n    return len(s.split(\" \"))\n",
        ("regex_replace", r"split\(\" \"\)", "split()"),
        ['namespace["is_palindrome"]("Never odd or even")', 'namespace["word_count"]("a  b\\tc") == 3'],
        T("palindrome", ["assert solution.is_palindrome('Racecar')", "assert solution.is_palindrome('Never odd or even')",
                         "assert not solution.is_palindrome('dagnet')"])
        + T("word_count", ["assert solution.word_count('one two  three') == 3", "assert solution.word_count('a\\tb\\nc') == 3",
                           "assert solution.word_count('') == 0"])))
    out.append(code_task("code_fizzbuzz_factorial",
        "`fizzbuzz(n)` checks 3 before 15 so it never says FizzBuzz; `factorial(n)` stops one short. Fix both.",
        "def fizzbuzz(n):\n    if n % 3 == 0:\n        return \"Fizz\"\n    if n % 5 == 0:\n        return \"Buzz\"\n    if n % 15 == 0:\n        return \"FizzBuzz\"\n    return str(n)\n",
        ("regex_replace", r"    if n % 3 == 0:\n", "    if n % 15 == 0:\\n        return \"FizzBuzz\"\\n    if n % 3 == 0:\\n"),
        "def factorial(n):\n    result = 1\n    for k in range(1, n):\n        result *= k\n    return result\n",
        ("replace", "range(1, n)", "range(2, n + 1)"),
        ['namespace["fizzbuzz"](30) == "FizzBuzz"', 'namespace["factorial"](5) == 120'],
        T("fizzbuzz", ["assert [solution.fizzbuzz(i) for i in (1, 3, 5, 15)] == ['1', 'Fizz', 'Buzz', 'FizzBuzz']"])
        + T("factorial", ["assert solution.factorial(0) == 1", "assert solution.factorial(1) == 1",
                          "assert solution.factorial(6) == 720"])))
    out.append(code_task("code_temperature",
        "The temperature converters have the operator precedence wrong. Fix `c_to_f` and `f_to_c`.",
        "def c_to_f(c):\n    return c * 9 / (5 + 32)\n",
        ("replace", "c * 9 / (5 + 32)", "c * 9 / 5 + 32"),
        "def f_to_c(f):\n    return f - 32 * 5 / 9\n",
        ("regex_replace", r"return f - 32 \* 5 / 9", "return (f - 32) * 5 / 9"),
        ['namespace["c_to_f"](100) == 212', 'namespace["f_to_c"](212) == 100'],
        T("c_to_f", ["assert solution.c_to_f(0) == 32", "assert solution.c_to_f(100) == 212",
                     "assert solution.c_to_f(-40) == -40"])
        + T("f_to_c", ["assert solution.f_to_c(32) == 0", "assert solution.f_to_c(212) == 100"])))
    out.append(code_task("code_chunk_flatten",
        "`chunk(items, n)` should split a list into pieces of n (it steps by 1); `flatten(rows)` drops the last row. Fix both.",
        "def chunk(items, n):\n    return [items[i:i + n] for i in range(0, len(items), 1)]\n",
        ("replace", "range(0, len(items), 1)", "range(0, len(items), n)"),
        "def flatten(rows):\n    out = []\n    for row in rows[:-1]:\n        out.extend(row)\n    return out\n",
        ("replace", "rows[:-1]", "rows"),
        ['namespace["chunk"]([1, 2, 3], 2) == [[1, 2], [3]]', 'namespace["flatten"]([[1], [2, 3]]) == [1, 2, 3]'],
        T("chunk", ["assert solution.chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]", "assert solution.chunk([], 3) == []"])
        + T("flatten", ["assert solution.flatten([[1, 2], [3], []]) == [1, 2, 3]", "assert solution.flatten([]) == []"])))
    out.append(code_task("code_binary_search",
        "`binary_search(items, target)` moves the lower bound to mid (it loops forever); `insert_sorted` appends instead of inserting. Fix both.",
        "def binary_search(items, target):\n    lo, hi = 0, len(items) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n        if items[mid] == target:\n            return mid\n        if items[mid] < target:\n            lo = mid\n        else:\n            hi = mid - 1\n    return -1\n",
        ("replace", "lo = mid\n", "lo = mid + 1\n"),
        "def insert_sorted(items, value):\n    out = list(items)\n    out.append(value)\n    return out\n",
        ("regex_replace", r"out\.append\(value\)\n", "out.append(value)\\n    out.sort()\\n"),
        ['namespace["binary_search"]([1, 3, 5, 7], 7) == 3', 'namespace["insert_sorted"]([1, 5], 3) == [1, 3, 5]'],
        T("binary_search", ["items = [1, 3, 5, 7, 9, 11]", "assert solution.binary_search(items, 11) == 5",
                            "assert solution.binary_search(items, 1) == 0", "assert solution.binary_search(items, 4) == -1"])
        + T("insert_sorted", ["assert solution.insert_sorted([1, 4, 9], 5) == [1, 4, 5, 9]", "assert solution.insert_sorted([], 2) == [2]"])))
    out.append(code_task("code_vowels_reverse",
        "`count_vowels` forgets the letter u and capitals; `reverse_words` reverses characters instead of words. Fix both.",
        "def count_vowels(s):\n    return sum(1 for ch in s if ch in \"aeio\")\n",
        ("replace", "ch in \"aeio\"", "ch.lower() in \"aeiou\""),
        "def reverse_words(s):\n    return s[::-1]\n",
        ("regex_replace", r"return s\[::-1\]", "return \" \".join(s.split()[::-1])"),
        ['namespace["count_vowels"]("Ubuntu") == 3', 'namespace["reverse_words"]("a b c") == "c b a"'],
        T("count_vowels", ["assert solution.count_vowels('Education') == 5", "assert solution.count_vowels('xyz') == 0"])
        + T("reverse_words", ["assert solution.reverse_words('hello big world') == 'world big hello'"])))
    out.append(code_task("code_median_mode",
        "`median` forgets to sort and `mode` returns the least common value. Fix both.",
        "def median(values):\n    ordered = list(values)\n    mid = len(ordered) // 2\n    if len(ordered) % 2:\n        return ordered[mid]\n    return (ordered[mid - 1] + ordered[mid]) / 2\n",
        ("replace", "ordered = list(values)", "ordered = sorted(values)"),
        "def mode(values):\n    counts = {}\n    for v in values:\n        counts[v] = counts.get(v, 0) + 1\n    return min(counts, key=counts.get)\n",
        ("regex_replace", r"return min\(", "return max("),
        ['namespace["median"]([3, 1, 2]) == 2', 'namespace["mode"]([1, 2, 2]) == 2'],
        T("median", ["assert solution.median([5, 1, 3]) == 3", "assert solution.median([4, 1, 3, 2]) == 2.5"])
        + T("mode", ["assert solution.mode([1, 1, 2, 3, 3, 3]) == 3", "assert solution.mode(['a']) == 'a'"])))
    out.append(code_task("code_gcd_lcm",
        "`gcd` swaps its arguments the wrong way and `lcm` uses true division. Fix both (results are ints).",
        "def gcd(a, b):\n    while b:\n        a, b = b, a // b\n    return a\n",
        ("replace", "a, b = b, a // b", "a, b = b, a % b"),
        "def lcm(a, b):\n    from math import gcd as _gcd\n    return a * b / _gcd(a, b)\n",
        ("regex_replace", r"a \* b / _gcd", "a * b // _gcd"),
        ['namespace["gcd"](12, 18) == 6', 'namespace["lcm"](4, 6) == 12'],
        T("gcd", ["assert solution.gcd(12, 18) == 6", "assert solution.gcd(17, 5) == 1"])
        + T("lcm", ["assert solution.lcm(4, 6) == 12", "assert isinstance(solution.lcm(3, 5), int)"])))
    out.append(code_task("code_kv_dedupe",
        "`parse_kv` splits pairs on the wrong separator and `dedupe` loses the original order. Fix both.",
        "def parse_kv(text):\n    pairs = [p for p in text.split(\",\") if p]\n    return dict(p.split(\"=\", 1) for p in pairs)\n",
        ("replace", "text.split(\",\")", "text.split(\";\")"),
        "def dedupe(items):\n    return list(set(items))\n",
        ("regex_replace", r"list\(set\(items\)\)", "list(dict.fromkeys(items))"),
        ['namespace["parse_kv"]("a=1;b=2") == {"a": "1", "b": "2"}', 'namespace["dedupe"]([3, 1, 3, 2]) == [3, 1, 2]'],
        T("parse_kv", ["assert solution.parse_kv('host=db;port=5432') == {'host': 'db', 'port': '5432'}",
                       "assert solution.parse_kv('') == {}"])
        + T("dedupe", ["assert solution.dedupe(['b', 'a', 'b', 'c', 'a']) == ['b', 'a', 'c']"])))
    return out
