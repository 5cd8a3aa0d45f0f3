"""Jinja's immutable sandbox with a budget. A chat template is code from a model's folder: the
sandbox keeps it from Python's internals but not from the machine's memory or time.
`{{ 'x' * 6000000000 }}` took 3 GiB while being compiled (Jinja folds constant expressions
then), and two nested `range(100000)` loops never ended.

Here nothing is folded at compile time (the arithmetic operators and every filter run only
when rendering), and each render has a `Budget`: loop iterations, calls, filters and operators
are steps, within a count and a deadline; every value made is charged by its size; and an
operation that can make far more than it is given (repetition, padding, replacing, joining,
formatting, a list written out as text) is refused before it runs when what it would make is
past the budget's room."""

from __future__ import annotations

import contextvars
import re
import time
from dataclasses import dataclass, field

from jinja2 import nodes, pass_context
from jinja2.compiler import CodeGenerator
from jinja2.runtime import LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace

STEPS = 1_000_000  # loop iterations, calls, filters and operators in one render
SECONDS = 1.0  # one render's time (a real template takes milliseconds)
EACH = "swiftwriter_each"  # the filter every loop's iterable goes through


class TemplateLimit(Exception):
    """A render went past its budget; the message says what and the limit."""


@dataclass
class Budget:
    """One render's allowance: `room` characters (or items) for any value it makes and for its
    output, 4 x `room` made in all, `steps` steps and `seconds` seconds."""

    room: int
    steps: int = STEPS
    seconds: float = SECONDS
    made: int = 0
    output: int = 0
    taken: int = 0
    deadline: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.seconds

    def step(self) -> None:
        self.taken += 1
        if self.taken > self.steps:
            raise TemplateLimit(f"it took more than {self.steps:,} steps")
        if time.monotonic() > self.deadline:
            raise TemplateLimit(f"it ran for more than {self.seconds:g} s")

    def allow(self, size: int, what: str) -> None:
        """Refuse, before it is made, a value of `size` characters past the room."""
        if size > self.room:
            raise TemplateLimit(f"{what} would make {size:,} characters (limit {self.room:,})")

    def charge(self, value, what: str) -> None:
        """A value just made: within the room, and within what a render may make in all."""
        size = _size(value)
        self.allow(size, what)
        self.made += size
        if self.made > 4 * self.room:
            raise TemplateLimit(f"it made more than {4 * self.room:,} characters in all")

    def write(self, size: int) -> None:
        self.output += size
        if self.output > self.room:
            raise TemplateLimit(f"its output passed {self.room:,} characters")
        self.step()


_current: contextvars.ContextVar[Budget] = contextvars.ContextVar("template_budget")


def render(template, budget: Budget, variables: dict) -> str:
    """`template` (made by a `BoundedSandbox`) rendered within `budget`, piece by piece."""
    pieces = []
    token = _current.set(budget)
    try:
        for piece in template.generate(**variables):
            budget.write(len(piece))
            pieces.append(piece)
    finally:
        _current.reset(token)
    return "".join(pieces)


def _size(value) -> int:
    """Characters or items a value holds (not what they refer to: charged when made)."""
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return len(value)
    if isinstance(value, int):
        return value.bit_length() // 3
    return 1


def shape(value, limit: int) -> tuple[int, int, int]:
    """(about how many characters `str(value)` has, however often its items are the same
    object; its items; its depth), counting stopped past `limit`."""
    chars = count = depth = 0
    stack = [(value, 1)]
    while stack and chars <= limit and count <= limit:
        item, level = stack.pop()
        count += 1
        depth = max(depth, level)
        if isinstance(item, Namespace):
            item = object.__getattribute__(item, "_Namespace__attrs")
        if isinstance(item, str):
            chars += len(item) + 2
        elif isinstance(item, dict):
            chars += 2 + 4 * len(item)
            stack.extend((part, level + 1) for pair in item.items() for part in pair)
        elif isinstance(item, (list, tuple, set, frozenset)):
            chars += 2 + 2 * len(item)
            stack.extend((part, level + 1) for part in item)
        elif isinstance(item, int):
            chars += item.bit_length() // 3 + 1
        else:
            chars += 24  # a float, None, an Undefined, a macro
    return (limit + 1 if stack else chars), count, depth


def text_size(value, limit: int) -> int:
    return shape(value, limit)[0]


def _number(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\d+|\*)?(?:\.(\d+|\*))?")
_BRACE_SPEC = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}")


def format_room(fmt: str, values, limit: int) -> int:
    """What `fmt % values` or `fmt.format(*values)` can make: its text, the values as text,
    and for every field the widest width or precision it states, or takes from the values."""
    specs = [s for m in _PERCENT_SPEC.finditer(fmt) for s in m.groups() if s]
    specs += [m.group() for m in _BRACE_SPEC.finditer(fmt)]
    digits = [d for spec in specs for d in re.findall(r"\d+", spec)]
    widest = max((int(d) if len(d) < 19 else 10**19 for d in digits), default=0)
    if any("*" in s or s.count("{") > 1 for s in specs):
        seq = values if isinstance(values, (list, tuple)) else [values]
        widest = max([widest, *(_number(v) for v in seq)])
    return len(fmt) + text_size(values, limit) + len(specs) * widest


def _binop_room(op: str, left, right, limit: int) -> int | None:
    """What `left op right` can make, where it can make far more than it is given."""
    sequences = (str, list, tuple)
    if op == "*":
        if isinstance(left, int) and isinstance(right, sequences):
            left, right = right, left
        if isinstance(left, sequences) and isinstance(right, int):
            return len(left) * max(0, right)
        if isinstance(left, int) and isinstance(right, int):
            return (left.bit_length() + right.bit_length()) // 3
    if op == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        return right * max(0, abs(left).bit_length() - 1) // 3
    if op == "%" and isinstance(left, str):
        return format_room(left, right, limit)
    if op == "+" and isinstance(left, sequences) and isinstance(right, sequences):
        return len(left) + len(right)
    return None


def _lines_times(text: int, piece: int) -> int:
    return text + (text + 1) * piece


def _summed(value, a, T) -> int:
    """A sum of numbers is one number; a sum of lists or strings copies each partial sum."""
    if a["attribute"] is None and all(isinstance(v, (int, float)) for v in value):
        return 1
    return len(value) * sum(T(v) for v in value) // 2


def _laid_out(value, a, T, limit: int) -> int:
    """tojson / pprint: every item on its own line, indented by its depth."""
    chars, count, depth = shape(value, limit)
    indent = a.get("indent")
    step = indent if isinstance(indent, int) else T(indent) if indent else 1
    return 6 * chars + count * depth * (step + 1) + count * T(a.get("separators") or "")


# The filters that can make far more than they are given: their arguments after the value
# (name, default), and the most each can make (T: a value's size as text).
_FILTER_ROOMS = {
    "center": ((("width", 80),), lambda v, a, T, n: max(T(v), _number(a["width"]))),
    "indent": (
        (("width", 4), ("first", False), ("blank", False)),
        lambda v, a, T, n: _lines_times(
            T(v), a["width"] if isinstance(a["width"], int) else T(a["width"])
        ),
    ),
    "wordwrap": (
        (("width", 79), ("break_long_words", True), ("wrapstring", None)),
        lambda v, a, T, n: _lines_times(T(v), T(a["wrapstring"] or "\n")),
    ),
    "format": ((), lambda v, a, T, n: format_room(str(v), [*a["*"], *a["**"].values()], n)),
    "join": (
        (("d", ""), ("attribute", None)),
        lambda v, a, T, n: sum(T(x) for x in v) + len(v) * T(a["d"]),
    ),
    "replace": (
        (("old", ""), ("new", ""), ("count", None)),
        lambda v, a, T, n: T(v)
        + min(T(v) // max(1, len(str(a["old"]))) + 1, _number(a["count"]) or 10**19)
        * T(a["new"]),
    ),
    "truncate": ((("length", 255), ("killwords", False), ("end", "...")),
                 lambda v, a, T, n: T(v) + T(a["end"])),  # fmt: skip
    "batch": ((("linecount", 0),), lambda v, a, T, n: _number(a["linecount"])),
    "slice": ((("slices", 0),), lambda v, a, T, n: _number(a["slices"])),
    "sum": ((("attribute", None), ("start", 0)), lambda v, a, T, n: _summed(v, a, T)),
    "urlize": (
        (("trim_url_limit", None), ("nofollow", False), ("target", None), ("rel", None)),
        lambda v, a, T, n: (T(v) + 1) * (40 + T(a["target"] or "") + T(a["rel"] or "")),
    ),
    "tojson": (
        (("ensure_ascii", False), ("indent", None), ("separators", None)),
        lambda v, a, T, n: _laid_out(v, a, T, n),
    ),
    "pprint": ((), lambda v, a, T, n: _laid_out(v, a, T, n)),
    **{name: ((), lambda v, a, T, n: 6 * T(v)) for name in
       ("string", "escape", "e", "forceescape", "urlencode", "xmlattr", "list")},
}  # fmt: skip
_MATERIALIZED = ("join", "sum")  # filters whose iterable becomes a list first, to be measured


def _arguments(params, args, kwargs) -> dict:
    named = dict(params)
    named.update(zip((name for name, _ in params), args, strict=False))
    named.update(kwargs)
    named["*"], named["**"] = args, kwargs
    return named


def _call_room(target, args, kwargs, limit: int) -> int | None:
    """What a call can make, for the calls that can make far more than they are given: the
    string methods that pad, repeat, replace, join or format, and `lipsum()`."""
    owner, name = getattr(target, "__self__", None), getattr(target, "__name__", "")
    first = args[0] if args else None
    if name == "generate_lorem_ipsum":
        words = max(_number(kwargs.get("max", args[3] if len(args) > 3 else 100)), 20)
        return _number(kwargs.get("n", first if args else 5)) * words * 12
    if not isinstance(owner, str):
        return None
    if name in ("center", "ljust", "rjust", "zfill"):
        return max(len(owner), _number(first))
    if name == "expandtabs":
        return len(owner) * max(1, _number(first) if args else 8)
    if name == "replace" and len(args) >= 2:
        return len(owner) + (len(owner) // max(1, len(str(first))) + 1) * len(str(args[1]))
    if name == "join" and isinstance(first, (list, tuple)):
        return sum(text_size(x, limit) for x in first) + len(first) * len(owner)
    if name in ("format", "format_map"):
        return format_room(owner, [*args, *kwargs.values()], limit)
    if name == "translate" and isinstance(first, dict):
        return len(owner) * max([text_size(v, limit) for v in first.values()] + [1])
    return None


def _is_str_method(target, name: str) -> bool:
    return isinstance(getattr(target, "__self__", None), str) and target.__name__ == name


class _BoundedCode(CodeGenerator):
    """Jinja's code generator, with every loop's iterable counted item by item and `a ~ b`
    measured before it is joined."""

    def visit_Template(self, node, frame=None):
        for loop in node.find_all(nodes.For):
            loop.iter = nodes.Filter(loop.iter, EACH, [], [], None, None, lineno=loop.lineno)
        super().visit_Template(node, frame)

    def visit_Concat(self, node, frame):
        self.write("environment.joined((")
        for part in node.nodes:
            self.visit(part, frame)
            self.write(", ")
        self.write("))")


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, bounded (see above). Its templates render only through
    `render()`, which gives the hooks their budget. Give it its filters, then `bound()`."""

    code_generator_class = _BoundedCode
    intercepted_binops = frozenset(["+", "-", "*", "/", "//", "%", "**"])  # none folded

    def __init__(self, **options):
        super().__init__(optimized=False, finalize=_finalize, **options)
        self.concat = _joined_buffer  # a macro's or a block's output

    def bound(self) -> BoundedSandbox:
        """Every filter behind the budget (a filter that takes the context is never folded at
        compile time), and the filter that counts the loops' items."""
        for name, func in list(self.filters.items()):
            self.filters[name] = _bounded_filter(name, func)
        self.filters[EACH] = _each
        return self

    def call_binop(self, context, op, left, right):
        budget = _current.get()
        budget.step()
        room = _binop_room(op, left, right, budget.room)
        if room is not None:
            budget.allow(room, f"{type(left).__name__} {op} {type(right).__name__}")
        value = self.binop_table[op](left, right)
        budget.charge(value, op)
        return value

    def getitem(self, obj, argument):
        value = super().getitem(obj, argument)
        if isinstance(argument, slice):
            _current.get().charge(value, "a slice")
        return value

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 - Jinja's own names
        budget = _current.get()
        budget.step()
        if isinstance(__obj, LoopContext) and args:  # a recursive loop's next level
            args = (_each(args[0]), *args[1:])
        target = getattr(__obj, "__wrapped__", __obj)  # str.format, as the sandbox wraps it
        if _is_str_method(target, "join") and args and not isinstance(args[0], (list, tuple)):
            iterable = args[0]  # made a list, to be measured (a generator's items counted)
            args = (list(iterable if isinstance(iterable, (str, dict)) else _each(iterable)),)
        room = _call_room(target, args, kwargs, budget.room)
        if room is not None:
            budget.allow(room, f"{getattr(target, '__name__', 'a call')}()")
        value = super().call(__context, __obj, *args, **kwargs)
        budget.charge(value, "a call")
        return value

    def joined(self, parts) -> str:
        """`a ~ b ~ c`: measured as text before it is joined."""
        budget = _current.get()
        budget.allow(sum(text_size(p, budget.room) for p in parts), "~")
        value = "".join(map(str, parts))
        budget.charge(value, "~")
        return value


def _joined_buffer(pieces) -> str:
    budget = _current.get()
    pieces = list(pieces)
    budget.allow(sum(map(len, pieces)), "a block")
    value = "".join(pieces)
    budget.charge(value, "a block")
    return value


@pass_context
def _finalize(context, value):
    """Every `{{ value }}`, measured as text before Jinja writes it out."""
    budget = _current.get()
    budget.step()
    if not isinstance(value, str):
        budget.allow(text_size(value, budget.room), "writing a value")
    return value


def _each(iterable):
    """A loop's items, a step each."""
    budget = _current.get()
    for item in iterable:
        budget.step()
        yield item


_PASSED = {"context": lambda c: c, "eval_context": lambda c: c.eval_ctx,
           "environment": lambda c: c.environment}  # fmt: skip


def _bounded_filter(name: str, func):
    """`func` as a filter that takes a step, is measured first where it can make far more than
    it is given, and whose result is charged."""
    lead = _PASSED.get(getattr(getattr(func, "jinja_pass_arg", None), "name", ""))
    params, room = _FILTER_ROOMS.get(name, ((), None))

    @pass_context
    def bounded(context, value, *args, **kwargs):
        budget = _current.get()
        budget.step()
        if name in _MATERIALIZED and not isinstance(value, (list, tuple, str, dict)):
            value = list(_each(value))
        if room is not None:
            size = room(value, _arguments(params, args, kwargs),
                        lambda v: text_size(v, budget.room), budget.room)  # fmt: skip
            budget.allow(size, f"|{name}")
        front = () if lead is None else (lead(context),)
        result = func(*front, value, *args, **kwargs)
        budget.charge(result, f"|{name}")
        return result

    return bounded
