"""The packed figures of an aggregate hash (streameval.store_codec.pack_increments): MessagePack as the record
script's ``cmsgpack`` reads it, byte for byte, and read back by hash_fields."""

from __future__ import annotations

import struct

from streameval.store_codec import PACKED_FIELD, hash_fields, pack_increments


def test_counts_pack_as_integers_and_sums_as_doubles_byte_for_byte() -> None:
    packed = pack_increments({"count": 3.0, "sum": 0.5, "passes": 0.0, "grade:A": 200.0})
    assert packed == (
        b"\x83"  # a map of 3: the zero is left out
        + b"\xa5count\x03"  # fixstr, positive fixint
        + b"\xa3sum\xcb"
        + struct.pack(">d", 0.5)  # float 64
        + b"\xa7grade:A\xd3"
        + struct.pack(">q", 200)  # int 64 beyond a fixint
    )


def test_long_names_and_many_fields_read_back() -> None:
    fields = {f"ev:judge:c:{i}": i + 0.25 for i in range(20)}  # more than 15: a map 16
    fields["x" * 40] = 1.0  # str 8
    fields["y" * 300] = 2.0  # str 16
    fields["count"] = float(2**70)  # whole, beyond int 64: a double
    for _ in range(2):  # the second time from the encoded names kept
        packed = pack_increments(fields)
        assert packed[:1] == b"\xde"
        assert hash_fields({PACKED_FIELD: packed}) == fields
