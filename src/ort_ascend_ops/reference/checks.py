"""The contract's rules on the portable path.

ONNX has no assert operator. ``Check(value, ok, rule=...)`` is ``value`` picked out of a batch of
one by a Gather: at index 0 when ``ok`` holds, at index 1 (out of bounds) when the rule is broken,
so that every engine fails on that node. When the functions are emitted (``emit.py``) each call
becomes its nodes, the Gather named ``"<op>: <rule>"``: ONNX Runtime's error then reads "... while
running Gather node. Name:'_inlfunc_RmsNorm_RmsNorm: input 'gamma' must ...'". Checks guard the
small values (shapes, counts) the computation goes on with, so an optimizer cannot drop a check
without dropping what depends on it.

Element types are static: ``SameType`` makes one rule about them fail when the session is
created. ONNX cannot ask a tensor for its element type, though: where a rule allows a set of
types, ``ElemType`` tells them apart at run time by which probe values survive a round trip
through them.
"""

from onnxscript import BOOL, DOUBLE, INT64, script

from ._opset import ascend, op

# ElemType's codes: bit i is set when probe i survives a cast to the type and back.
TYPE_FLOAT32, TYPE_FLOAT16, TYPE_BFLOAT16, TYPE_INT32, TYPE_INT64 = 119, 19, 113, 80, 112

# Probes (a fraction below 1, then 1 + 2^-9, 2^-12, 2^-30: the first three mantissa widths that
# bfloat16, float16 and float32 cannot hold) and integer probes (-1, 2^40, 2^16: sign, and the
# ranges of 64-bit, 32-bit and 16-bit integers and float16).
_FRACTIONS = [-0.5, 2.0**-9, 2.0**-12, 2.0**-30]  # added to 1, in float64
_INTEGERS = [-1, 2**40, 2**16]
_BITS = [1, 2, 4, 8, 16, 32, 64]


@script(opset=ascend, default_opset=op)
def Check(value, ok, rule: str):
    """``value`` when the boolean scalar ``ok`` holds; otherwise the Gather fails (see above)."""
    batch = op.Unsqueeze(value, op.Constant(value_ints=[0]))
    return op.Gather(batch, op.Where(ok, op.Constant(value_int=0), op.Constant(value_int=1)), axis=0)


@script(opset=ascend, default_opset=op)
def SameType(a, b, rule: str):
    """Nothing at run time: a Concat of empty tensors of a's and b's types, which ONNX Runtime's
    type inference refuses when they differ, naming the node (after ``rule``, emitted) as it
    creates the session."""
    empty = op.Constant(value_floats=[])
    return op.Concat(op.CastLike(empty, a), op.CastLike(empty, b), axis=0)


@script(opset=ascend, default_opset=op)
def ElemType(x):
    """A code of x's element type (one of the TYPE_* codes, or another)."""
    fractions = op.Cast(op.Constant(value_floats=_FRACTIONS), to=DOUBLE.dtype) + op.Cast(
        op.Constant(value_float=1.0), to=DOUBLE.dtype
    )
    integers = op.Constant(value_ints=_INTEGERS)
    # Back in float64, where every probe and every value the types round them to is exact.
    kept_fractions = op.Equal(op.Cast(op.CastLike(fractions, x), to=DOUBLE.dtype), fractions)
    kept_integers = op.Equal(
        op.Cast(op.CastLike(integers, x), to=DOUBLE.dtype), op.Cast(integers, to=DOUBLE.dtype)
    )
    kept = op.Concat(op.Cast(kept_fractions, to=INT64.dtype), op.Cast(kept_integers, to=INT64.dtype), axis=0)
    return op.ReduceSum(kept * op.Constant(value_ints=_BITS), keepdims=0)


@script(opset=ascend, default_opset=op)
def IsFloatT(code):
    """Whether an ElemType code is one of T's types: float32, float16 or bfloat16."""
    f32 = op.Equal(code, op.Constant(value_int=TYPE_FLOAT32))
    f16 = op.Equal(code, op.Constant(value_int=TYPE_FLOAT16))
    return op.Or(op.Or(f32, f16), op.Equal(code, op.Constant(value_int=TYPE_BFLOAT16)))


@script(opset=ascend, default_opset=op)
def IsIndexType(code):
    """Whether an ElemType code is int32 or int64."""
    return op.Or(
        op.Equal(code, op.Constant(value_int=TYPE_INT32)), op.Equal(code, op.Constant(value_int=TYPE_INT64))
    )


@script(opset=ascend, default_opset=op)
def All(flags):
    """Whether every one of the booleans ``flags`` (any shape, empty included) holds, as a scalar:
    a check's condition must be one even where a broken rule gives its operands odd shapes."""
    return op.Cast(op.ReduceProd(op.Cast(flags, to=INT64.dtype), keepdims=0), to=BOOL.dtype)


@script(opset=ascend, default_opset=op)
def AnyOf(flags):
    """Whether one of the booleans ``flags`` (1-D, not empty) holds, as a scalar."""
    return op.Cast(op.ReduceMax(op.Cast(flags, to=INT64.dtype), keepdims=0), to=BOOL.dtype)


@script(opset=ascend, default_opset=op)
def PadPair(a, b):
    """The 1-D int64 tensors a and b (shapes, say) padded with -1 to the longer length, so that
    comparing them never meets unequal lengths (which static shape inference would refuse)."""
    length_a = op.Shape(a)
    length_b = op.Shape(b)
    longest = op.Max(length_a, length_b)
    zero_1d = op.Constant(value_ints=[0])
    padding = op.Constant(value_int=-1)
    padded_a = op.Pad(a, op.Concat(zero_1d, longest - length_a, axis=0), padding)
    padded_b = op.Pad(b, op.Concat(zero_1d, longest - length_b, axis=0), padding)
    return padded_a, padded_b


@script(opset=ascend, default_opset=op)
def SameVector(a, b):
    """Whether the 1-D int64 tensors a and b are equal, lengths included."""
    padded_a, padded_b = PadPair(a, b)
    return All(op.Equal(padded_a, padded_b))


@script(opset=ascend, default_opset=op)
def WithoutOnes(shape):
    """The 1-D int64 ``shape`` with its size-1 axes dropped."""
    return op.Compress(shape, op.Not(op.Equal(shape, op.Constant(value_int=1))), axis=0)


@script(opset=ascend, default_opset=op)
def ReadPresent(prefix, x, rule: str):
    """Optional input ``x`` where the caller has found it present (OptionalHasElement): ONNX
    Runtime refuses an absent input in any slot but a variadic one, even in a branch never taken,
    so x goes through Concat after ``prefix``, an empty tensor of the type and shape x must have
    (its first axis 0), which fixes Concat's type when x is absent. Concat fails on an x of another
    shape: emitted, that node is named after ``rule``."""
    return op.Concat(prefix, x, axis=0)
