"""The bounded GGUF header scan: it reads a real file's tensor table as the `gguf` reader does,
and refuses each length, count or placement past its limit in one line naming the file and
the limit, before anything else reads the file."""

from __future__ import annotations

import struct

import gguf
import pytest
from swiftwriter.errors import UserError
from swiftwriter.modelstore import gguf_header

from tests.modelstore.hostile_models import (
    ARRAY,
    LLAMA,
    STRING,
    UINT8,
    UINT32,
    array_kv,
    gguf_bytes,
    string_kv,
    tensor,
    text,
)
from tests.modelstore.tiny_gguf import tiny_model, write_gguf

Q8_0 = 8  # a tensor type of 32-value blocks


@pytest.fixture(scope="module")
def tiny():
    return tiny_model()


@pytest.mark.parametrize("qtype", ["F32", "Q8_0"])
def test_a_real_file_reads_as_the_gguf_reader_reads_it(tmp_path, tiny, qtype):
    path = write_gguf(tmp_path / "tiny.gguf", tiny, qtype=qtype)
    header = gguf_header.read(path)
    reader = gguf.GGUFReader(path)
    assert [(t.name, t.kind, t.elements, t.start, t.size) for t in header.tensors] == [
        (t.name, t.tensor_type.name, int(t.n_elements), int(t.data_offset), int(t.n_bytes))
        for t in reader.tensors
    ]
    arrays = [f for f in reader.fields.values() if f.types[:1] == [gguf.GGUFValueType.ARRAY]]
    assert header.elements == sum(len(f.data) for f in arrays) > 256
    assert header.values["general.architecture"] == "llama"
    assert header.values["llama.context_length"] == 2048
    assert header.values["tokenizer.chat_template"].startswith("{% for message")
    assert "tokenizer.ggml.pre" not in header.values  # strings the app does not read: skipped


def test_a_big_endian_file_reads_the_same(tmp_path):
    for order in "<>":
        kvs = [string_kv(b"general.architecture", b"llama", order)]
        tensors = [tensor(b"a", (4, 2), order=order), tensor(b"b", (8,), offset=32, order=order)]
        (tmp_path / f"{order == '>'}.gguf").write_bytes(
            gguf_bytes(kvs, tensors, bytes(64), 3, order)
        )
    little, big = (gguf_header.read(tmp_path / f"{b}.gguf") for b in (False, True))
    assert big == little and [t.elements for t in big.tensors] == [8, 8]


def u8(key: bytes, length: int, payload: bytes = b"") -> bytes:
    return array_kv(key, UINT8, length, payload)


def w(dims=(8,), kind=0, offset=0, name=b"w") -> bytes:
    return tensor(name, dims, kind, offset)


REFUSED = {
    "2^62 elements": (gguf_bytes([LLAMA, u8(b"junk", 1 << 62)]),
                      "metadata 'junk' declares 4,611,686,018,427,387,904 elements, more than "
                      "the 0 bytes left in the file hold"),
    "an array past its cap": (gguf_bytes([u8(b"junk", (1 << 19) + 1, bytes((1 << 19) + 1))]),
                              "metadata 'junk' holds 524,289 elements, more than the 524,288"),
    "a string past the end": (gguf_bytes([text(b"k") + struct.pack("<IQ", STRING, 1 << 40)]),
                              "metadata 'k' declares 1,099,511,627,776 bytes, more than the 0"),
    "a vocabulary past its cap": (
        gguf_bytes([array_kv(b"tokenizer.ggml.tokens", STRING, (1 << 19) + 1,
                             bytes(8 * ((1 << 19) + 1)))]),
        "a vocabulary of 524,289 tokens (tokenizer.ggml.tokens), more than the 524,288"),
    "an array of arrays": (gguf_bytes([array_kv(b"nest", ARRAY, 1)]),
                           "metadata 'nest' is an array of type 9, not of values"),
    "an unknown value type": (gguf_bytes([text(b"odd") + struct.pack("<I", 99)]),
                              "metadata 'odd' has unknown type 99"),
    "more keys than bytes": (b"GGUF" + struct.pack("<IQQ", 3, 0, 1 << 20),
                             "the header declares 1,048,576 metadata keys, more than the 0"),
    "more tensors than allowed": (b"GGUF" + struct.pack("<IQQ", 3, 1 << 17, 0) + bytes(1 << 17),
                                  "the header holds 131,072 tensors, more than the 65,536"),
    "a cut header": (gguf_bytes([LLAMA])[:30], "is truncated: its header ends past the file's end"),
    "a key given twice": (gguf_bytes([LLAMA, LLAMA]),
                          "metadata 'general.architecture' is given twice"),
    "a key not UTF-8": (gguf_bytes([string_kv(b"k\xff", b"v")]),
                        "a metadata key at byte 24 is not UTF-8 text"),
    "an architecture not UTF-8": (gguf_bytes([string_kv(b"general.architecture", b"ll\xffma")]),
                                  "general.architecture is not UTF-8 text"),
    "an alignment of 3": (gguf_bytes([text(b"general.alignment") + struct.pack("<II", UINT32, 3)]),
                          "general.alignment 3 is not a power of two"),
    "an alignment as text": (gguf_bytes([string_kv(b"general.alignment", b"32")]),
                             "general.alignment is not a uint32"),
    "version 1": (gguf_bytes([LLAMA], version=1), "GGUF version 1, which this cannot read"),
    "five dimensions": (gguf_bytes([LLAMA], [w((1, 1, 1, 1, 1))], bytes(4)),
                        "tensor 'w' has 5 dimensions, more than 4"),
    "an unknown tensor type": (gguf_bytes([LLAMA], [w(kind=99)], bytes(32)),
                               "tensor 'w' has unknown type 99"),
    "an offset off the alignment": (gguf_bytes([LLAMA], [w(offset=4)], bytes(64)),
                                    "tensor 'w' starts off its 32-byte alignment"),
    "part blocks": (gguf_bytes([LLAMA], [w((10,), kind=Q8_0)], bytes(64)),
                    "tensor 'w': rows of 10 values are not whole Q8_0 blocks of 32"),
    "a tensor past the end": (gguf_bytes([LLAMA], [w((64,))], bytes(32)),
                              "is truncated: tensor 'w' ends at byte"),
    "a tensor given twice": (gguf_bytes([LLAMA], [w(), w(offset=32)], bytes(64)),
                             "tensor 'w' is given twice"),
    "tensors over each other": (gguf_bytes([LLAMA], [w((16,)), w(offset=32, name=b"v")], bytes(64)),
                                "tensor 'v' overlaps tensor 'w' (bytes 192 to 224)"),
}  # fmt: skip


@pytest.mark.parametrize("case", REFUSED)
def test_each_limit_is_refused_in_one_line_naming_the_file(tmp_path, case):
    data, why = REFUSED[case]
    path = tmp_path / "hostile.gguf"
    path.write_bytes(data)
    with pytest.raises(UserError) as refused:
        gguf_header.read(path)
    message = str(refused.value)
    assert message.startswith("hostile.gguf") and why in message and "\n" not in message


def test_all_arrays_together_have_a_cap_and_strings_too(tmp_path, monkeypatch):
    monkeypatch.setattr(gguf_header, "MAX_ELEMENTS", 10)
    path = tmp_path / "many.gguf"
    path.write_bytes(gguf_bytes([u8(b"a", 6, bytes(6)), u8(b"b", 6, bytes(6))]))
    with pytest.raises(UserError, match="more than the 10 elements allowed in all"):
        gguf_header.read(path)
    monkeypatch.setattr(gguf_header, "MAX_STRING", 16)
    path.write_bytes(gguf_bytes([string_kv(b"tokenizer.chat_template", b"x" * 17)]))
    with pytest.raises(UserError, match="tokenizer.chat_template holds 17 bytes, more than"):
        gguf_header.read(path)
    tokens = text(b"ok") + text(b"y" * 17)
    path.write_bytes(gguf_bytes([array_kv(b"tokenizer.ggml.tokens", STRING, 2, tokens)]))
    with pytest.raises(UserError, match="an element of metadata 'tokenizer.ggml.tokens' holds 17"):
        gguf_header.read(path)
