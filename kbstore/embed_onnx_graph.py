"""One edit of an ONNX graph at the protobuf wire level (no ``onnx`` package).

The shipped MiniLM model stores its weights as int8 initializers followed by
``Cast`` to float and ``Mul`` by a scale. onnxruntime's constant folding turns
every one of them into float32 at session start: 90 MB of weights, about
0.25 s and 210 MB of peak RSS before the first query. Most of it is the word
embedding table (30522 x 384), of which a query reads a dozen rows.

:func:`gather_before_dequantize` rewrites

    Gather(Mul(Cast(W_q), scale), ids)                      # whole table in float
into
    Mul(Cast(Gather(W_q, ids)), Gather(scale, ids))         # only the rows used

for a per-row scale (shape [N, 1]). Element by element it is the same float32
product of the same two numbers, so the vectors do not change. When the
pattern is not found exactly, the model bytes are returned unchanged.

Only the fields this edit needs are decoded (NodeProto input/output/name/
op_type/attribute, TensorProto dims/data_type/name); everything else is copied
byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass

# Field numbers from onnx.proto (stable since IR version 3).
MODEL_GRAPH = 7
GRAPH_NODE, GRAPH_INITIALIZER = 1, 5
NODE_INPUT, NODE_OUTPUT, NODE_NAME, NODE_OP_TYPE, NODE_ATTRIBUTE = 1, 2, 3, 4, 5
TENSOR_DIMS, TENSOR_DATA_TYPE, TENSOR_NAME = 1, 2, 8
ATTR_NAME, ATTR_I, ATTR_TYPE = 1, 3, 20
ATTR_TYPE_INT = 2
INT8, FLOAT = 3, 1  # TensorProto.DataType
VARINT, I64, LEN, I32 = 0, 1, 2, 5


def _varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes | memoryview) -> list[tuple[int, int, int, int, int]]:
    """(field number, wire type, start of the field, start of its value, end)."""
    out = []
    pos, end = 0, len(buf)
    while pos < end:
        start = pos
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value_start = pos
        if wire == VARINT:
            _, pos = _varint(buf, pos)
        elif wire == I64:
            pos += 8
        elif wire == I32:
            pos += 4
        elif wire == LEN:
            length, value_start = _varint(buf, pos)
            pos = value_start + length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > end:
            raise ValueError("truncated protobuf message")
        out.append((number, wire, start, value_start, pos))
    return out


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | LEN) + _encode_varint(len(payload)) + payload


def _int_field(number: int, value: int) -> bytes:
    return _encode_varint(number << 3 | VARINT) + _encode_varint(value)


@dataclass
class _Node:
    inputs: list[str]
    outputs: list[str]
    op_type: str
    int_attributes: dict[str, int]
    raw: memoryview  # the whole NodeProto field, tag included


def _node(buf: memoryview, start: int, value_start: int, end: int) -> _Node:
    inputs: list[str] = []
    outputs: list[str] = []
    op_type = ""
    attributes: dict[str, int] = {}
    body = buf[value_start:end]
    for number, wire, _, vs, ve in _fields(body):
        if wire != LEN:
            continue
        if number == NODE_INPUT:
            inputs.append(bytes(body[vs:ve]).decode())
        elif number == NODE_OUTPUT:
            outputs.append(bytes(body[vs:ve]).decode())
        elif number == NODE_OP_TYPE:
            op_type = bytes(body[vs:ve]).decode()
        elif number == NODE_ATTRIBUTE:
            attr = body[vs:ve]
            name, value = "", None
            for an, aw, _, avs, ave in _fields(attr):
                if an == ATTR_NAME and aw == LEN:
                    name = bytes(attr[avs:ave]).decode()
                elif an == ATTR_I and aw == VARINT:
                    value = _varint(attr, avs)[0]
            if value is not None:
                attributes[name] = value
    return _Node(inputs, outputs, op_type, attributes, buf[start:end])


def _tensor_header(buf: memoryview) -> tuple[str, int, list[int]]:
    """name, data type and dims of a TensorProto (its data is skipped)."""
    name, data_type, dims = "", 0, []
    for number, wire, _, vs, ve in _fields(buf):
        if number == TENSOR_NAME and wire == LEN:
            name = bytes(buf[vs:ve]).decode()
        elif number == TENSOR_DATA_TYPE and wire == VARINT:
            data_type = _varint(buf, vs)[0]
        elif number == TENSOR_DIMS and wire == VARINT:
            dims.append(_varint(buf, vs)[0])
        elif number == TENSOR_DIMS and wire == LEN:  # packed
            pos = vs
            while pos < ve:
                dim, pos = _varint(buf, pos)
                dims.append(dim)
    return name, data_type, dims


def _encode_node(op_type: str, inputs: list[str], outputs: list[str], name: str,
                 int_attributes: dict[str, int] | None = None) -> bytes:
    body = b"".join(_len_field(NODE_INPUT, i.encode()) for i in inputs)
    body += b"".join(_len_field(NODE_OUTPUT, o.encode()) for o in outputs)
    body += _len_field(NODE_NAME, name.encode()) + _len_field(NODE_OP_TYPE, op_type.encode())
    for key, value in (int_attributes or {}).items():
        attr = (_len_field(ATTR_NAME, key.encode()) + _int_field(ATTR_I, value)
                + _int_field(ATTR_TYPE, ATTR_TYPE_INT))
        body += _len_field(NODE_ATTRIBUTE, attr)
    return _len_field(GRAPH_NODE, body)


def gather_before_dequantize(model: bytes) -> tuple[bytes, int]:
    """The model with each int8 embedding table gathered before it is
    dequantized, and how many tables were rewritten (0: bytes unchanged)."""
    buf = memoryview(model)
    top = _fields(buf)
    graphs = [f for f in top if f[0] == MODEL_GRAPH and f[1] == LEN]
    if len(graphs) != 1:
        return model, 0
    _, _, g_start, g_value, g_end = graphs[0]
    graph = buf[g_value:g_end]
    graph_fields = _fields(graph)

    tensors = {}
    for number, wire, _, vs, ve in graph_fields:
        if number == GRAPH_INITIALIZER and wire == LEN:
            name, data_type, dims = _tensor_header(graph[vs:ve])
            tensors[name] = (data_type, dims)
    nodes = {i: _node(graph, s, vs, ve) for i, (number, wire, s, vs, ve)
             in enumerate(graph_fields) if number == GRAPH_NODE and wire == LEN}
    producer = {out: i for i, n in nodes.items() for out in n.outputs}
    consumers: dict[str, list[int]] = {}
    for i, n in nodes.items():
        for name in n.inputs:
            consumers.setdefault(name, []).append(i)

    replace: dict[int, bytes] = {}  # graph field index -> new bytes ("" drops it)
    for i, gather in nodes.items():
        if gather.op_type != "Gather" or gather.int_attributes.get("axis", 0) != 0 \
                or len(gather.inputs) != 2:
            continue
        table, ids = gather.inputs
        mul_i = producer.get(table)
        if mul_i is None or nodes[mul_i].op_type != "Mul" or len(nodes[mul_i].inputs) != 2:
            continue
        cast_out, scale = nodes[mul_i].inputs
        cast_i = producer.get(cast_out)
        if cast_i is None or nodes[cast_i].op_type != "Cast" \
                or nodes[cast_i].int_attributes.get("to") != FLOAT:
            continue
        weights = nodes[cast_i].inputs[0]
        if weights not in tensors or scale not in tensors:
            continue
        (w_type, w_dims), (s_type, s_dims) = tensors[weights], tensors[scale]
        if w_type != INT8 or len(w_dims) != 2 or s_type != FLOAT or s_dims != [w_dims[0], 1]:
            continue  # only a per-row scale can be gathered with the rows
        if consumers.get(table) != [i] or consumers.get(cast_out) != [mul_i]:
            continue  # the float table is used elsewhere: leave it
        prefix = f"{weights}.rows"
        new = (_encode_node("Gather", [weights, ids], [f"{prefix}_q"], f"{prefix}_q", {"axis": 0})
               + _encode_node("Cast", [f"{prefix}_q"], [f"{prefix}_f"], f"{prefix}_f",
                              {"to": FLOAT})
               + _encode_node("Gather", [scale, ids], [f"{prefix}_scale"], f"{prefix}_scale",
                              {"axis": 0})
               + _encode_node("Mul", [f"{prefix}_f", f"{prefix}_scale"], gather.outputs,
                              prefix))
        replace.update({cast_i: b"", mul_i: b"", i: new})
    if not replace:
        return model, 0

    parts: list[bytes | memoryview] = [
        replace[index] if index in replace else graph[start:end]
        for index, (_, _, start, _, end) in enumerate(graph_fields)]
    graph_length = sum(len(part) for part in parts)
    header = _encode_varint(MODEL_GRAPH << 3 | LEN) + _encode_varint(graph_length)
    # One join: the 23 MB of weights are copied once.
    new_model = b"".join([buf[:g_start], header, *parts, buf[g_end:]])
    return new_model, len(replace) // 3
