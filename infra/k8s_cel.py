"""The CEL of Kubernetes validation rules: the CEL C++ runtime plus the Kubernetes functions it lacks.

The API server compiles ``x-kubernetes-validations`` rules with standard CEL, the cel-go
extension libraries (strings: ``lowerAscii``, ``split``, …; optional types; ``cel.bind``) and
its own libraries (quantity, url, ip/cidr, regex, lists, format, semver, authz). The runtime
here (PyPI ``cel-expr-python``, the Python binding of the CEL C++ implementation) provides the
standard library, the strings, optional and bindings extensions. Of Kubernetes' own libraries
this module adds the quantity comparisons the CRDs we target use; a rule that calls anything
else does not compile, and ``compile_rule`` says which name was missing.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction
from typing import Any

# Multiplier of each suffix: binary SI, then decimal SI.
_SUFFIX = {
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 10**3), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
}
# <signedNumber><suffix>, suffix one of binary SI, decimal exponent or decimal SI (k8s resource.Quantity).
_QUANTITY = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE]?)")

# A quantity crosses the runtime as tagged text: the binding cannot return opaque values, and the
# tag keeps the comparison functions from accepting a plain string as a quantity.
_QUANTITY_TAG = "k8s.quantity:"


class CelCompileError(ValueError):
    """A CEL expression does not compile in the Kubernetes environment (parse or type error)."""


class CelEvalError(ValueError):
    """Evaluating a compiled CEL expression produced an error (e.g. a missing field)."""


# --------------------------------------------------------------------------- quantity library

def parse_quantity(text: str) -> Fraction:
    """The exact value of a Kubernetes quantity (``"1Gi"``, ``"500m"``, ``"1e3"``)."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid quantity {text!r}")
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return number * Fraction(10) ** int(suffix[1:])
    return number * _SUFFIX[suffix]


def _quantity(text: str) -> str:
    """CEL ``quantity(string)``: the tagged exact value of ``text``."""
    return f"{_QUANTITY_TAG}{parse_quantity(text)}"


def _quantity_value(value: Any) -> Fraction:
    """The exact value carried by a ``quantity(...)`` result; anything else is a type error."""
    if not (isinstance(value, str) and value.startswith(_QUANTITY_TAG)):
        raise TypeError(f"no such overload: {value!r} is not a quantity")
    return Fraction(value[len(_QUANTITY_TAG):])


def _compare_to(left: Any, right: Any) -> int:
    """CEL ``<quantity>.compareTo(<quantity>)``: -1, 0 or 1."""
    a, b = _quantity_value(left), _quantity_value(right)
    return (a > b) - (a < b)


def _is_greater_than(left: Any, right: Any) -> bool:
    """CEL ``<quantity>.isGreaterThan(<quantity>)``."""
    return _compare_to(left, right) > 0


def _is_less_than(left: Any, right: Any) -> bool:
    """CEL ``<quantity>.isLessThan(<quantity>)``."""
    return _compare_to(left, right) < 0


def _quantity_library(cel: Any) -> Any:
    """The quantity functions as a CEL extension (``cel`` is the runtime module)."""
    dyn = cel.Type.DYN

    def member(name: str, result: Any, impl: Any) -> Any:
        overload = cel.Overload(f"quantity_{name}", result, [dyn, dyn], is_member=True, impl=impl)
        return cel.FunctionDecl(name, [overload])

    return cel.CelExtension("kubernetes.quantity", [
        cel.FunctionDecl("quantity", [
            cel.Overload("string_to_quantity", dyn, [cel.Type.STRING], impl=_quantity)]),
        member("compareTo", cel.Type.INT, _compare_to),
        member("isGreaterThan", cel.Type.BOOL, _is_greater_than),
        member("isLessThan", cel.Type.BOOL, _is_less_than),
    ])


# --------------------------------------------------------------------------- environment

@functools.lru_cache(maxsize=None)
def _environment(old_self: bool) -> Any:
    """The compile environment: ``self`` (and ``oldSelf`` for transition rules), untyped."""
    from cel_expr_python import cel  # imported on first use, not at module import
    from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

    variables = {"self": cel.Type.DYN}
    if old_self:
        variables["oldSelf"] = cel.Type.DYN
    extensions = [ext_strings.ExtStrings(), ext_optional.ExtOptional(),
                  ext_bindings.ExtBindings(), _quantity_library(cel)]
    return cel.NewEnv(variables=variables, extensions=extensions)


@functools.lru_cache(maxsize=None)
def compile_rule(text: str, *, old_self: bool = False) -> Any:
    """A compiled program of ``text``; ``old_self`` declares ``oldSelf`` as well as ``self``.

    Raises ``CelCompileError`` with the runtime's first line of diagnosis (e.g. "undeclared
    reference to 'isURL'").
    """
    try:
        return _environment(old_self).compile(text)
    except RuntimeError as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CelCompileError(first.removeprefix("INVALID_ARGUMENT: ").removeprefix("ERROR: ")) from err


def evaluate(program: Any, self_value: Any) -> Any:
    """The Python value of ``program`` with ``self`` bound to ``self_value`` (plain YAML data).

    Raises ``CelEvalError`` when the evaluation ends in a CEL error.
    """
    from cel_expr_python import cel

    result = program.eval(data={"self": self_value})
    if result.type() == cel.Type.ERROR:
        raise CelEvalError(str(result.value()))
    return result.value()
