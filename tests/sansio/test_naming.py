"""File and folder names on disk, go-diskq's key placement, and consumer group names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adiskq import InvalidNameError
from adiskq._sansio.naming import (
    fnv1_32,
    group_folder,
    group_of_folder,
    parse_partition_dir,
    parse_segment_file,
    partition_dir_name,
    partition_for_key,
    segment_file_name,
    validate_group_name,
)

# (key, partition count, partition) as go-diskq itself places them.
GO_DISKQ_VECTORS = [
    ("aaa", 3, 0),
    ("bbb", 3, 1),
    ("ccc", 3, 2),
    ("customer-00", 3, 2),
    ("customer-01", 3, 0),
    ("key-0", 16, 1),
    ("key-4", 16, 5),
    ("héllo wörld", 16, 8),
]


@pytest.mark.parametrize(("key", "count", "partition"), GO_DISKQ_VECTORS)
def test_placement_matches_go_diskq(key: str, count: int, partition: int) -> None:
    """A key lands on the same partition as go-diskq puts it (FNV-1 32 of the UTF-8 bytes)."""
    assert partition_for_key(key.encode(), count) == partition


def test_fnv1_is_not_fnv1a() -> None:
    """The hash is FNV-1 (multiply, then xor): the published FNV-1 value of 'a' is 0x050c5d7e."""
    assert fnv1_32(b"") == 0x811C9DC5
    assert fnv1_32(b"a") == 0x050C5D7E


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_placement_is_a_valid_partition(key: bytes, count: int) -> None:
    """Every key maps to a partition in 0..count-1."""
    assert 0 <= partition_for_key(key, count) < count


def test_segment_file_names_have_twenty_digits() -> None:
    """Segment files are named by their base offset in twenty digits, then the kind."""
    assert segment_file_name(0, "data") == "00000000000000000000.data"
    assert segment_file_name(4711, "index") == "00000000000000004711.index"
    assert segment_file_name(10**20 - 1, "timeindex") == "99999999999999999999.timeindex"


def test_partition_folders_have_six_digits() -> None:
    """Partition folders are named by their number in six digits."""
    assert partition_dir_name(0) == "000000"
    assert partition_dir_name(3) == "000003"


@pytest.mark.parametrize("bad", [-1, 10**6])
def test_partition_number_out_of_range_is_refused(bad: int) -> None:
    """A partition number that does not fit six digits is refused."""
    with pytest.raises(ValueError, match="outside"):
        partition_dir_name(bad)


@pytest.mark.parametrize("bad", [-1, 10**20])
def test_offset_out_of_range_is_refused(bad: int) -> None:
    """A base offset that does not fit twenty digits is refused."""
    with pytest.raises(ValueError, match="twenty digits"):
        segment_file_name(bad, "data")


@given(st.integers(min_value=0, max_value=10**20 - 1), st.sampled_from(["data", "index", "timeindex", "keyindex"]))
def test_segment_names_parse_back(base: int, extension: str) -> None:
    """A segment file name parses back to its base offset and kind."""
    assert parse_segment_file(segment_file_name(base, extension)) == (base, extension)


@pytest.mark.parametrize(
    "stray",
    [
        "settings.json",
        "notes.txt",
        "0000000000000000000.data",  # nineteen digits
        "000000000000000000000.data",  # twenty-one digits
        "00000000000000000000.dat",
        "00000000000000000000.data.tmp",
        ".00000000000000000000.data",
        "00000000000000000000.data\n",
        "0000000000000000000a.data",
        "٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠.data",  # Arabic-Indic digits are not ASCII digits
        "",
    ],
)
def test_stray_files_are_not_segments(stray: str) -> None:
    """Names that are not exactly a segment file name are ignored (None), never misread."""
    assert parse_segment_file(stray) is None


@pytest.mark.parametrize("stray", ["00001", "0000001", "00000a", "000000\n", "٠٠٠٠٠٠", "tmp", ""])
def test_stray_folders_are_not_partitions(stray: str) -> None:
    """Folder names that are not exactly six ASCII digits are not partitions."""
    assert parse_partition_dir(stray) is None


def test_partition_folder_names_parse_back() -> None:
    """A partition folder name parses back to its number."""
    assert parse_partition_dir("000042") == 42


@pytest.mark.parametrize("name", ["billing", "a", "A-b_c.d", "0", "x" * 200, "team.v2"])
def test_good_group_names_are_kept(name: str) -> None:
    """Letters, digits, '_', '-' and '.' (not first) make a valid group name."""
    assert validate_group_name(name) == name


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "../x", "a/b", "/abs", ".hidden", "-dash", "a\x00b", "a\nb", "billing\n", "x" * 201, "é", "a b"],
)
def test_bad_group_names_are_refused(name: str) -> None:
    """Empty names, path separators, '..', hidden names and odd characters are refused clearly."""
    with pytest.raises(InvalidNameError, match="invalid consumer group name"):
        validate_group_name(name)


def test_group_name_must_be_text() -> None:
    """A group name that is not a str is refused with InvalidNameError (also a ValueError)."""
    with pytest.raises(ValueError, match="invalid consumer group name"):
        validate_group_name(b"billing")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["billing", "a", "B-2.x_y", "_", "9" * 200])
def test_a_plain_group_name_is_its_own_folder(name: str) -> None:
    """Group folders made before other names were taken keep their names, and read back as themselves."""
    assert group_folder(name) == name
    assert group_of_folder(name) == name


@pytest.mark.parametrize(
    ("name", "folder"),
    [
        ("app:billing", "%app%3Abilling"),
        ("team/svc", "%team%2Fsvc"),
        ("roundrobin,range", "%roundrobin%2Crange"),
        ("..", "%.."),
        (".hidden", "%.hidden"),
        ("-x", "%-x"),
        ("%41", "%%2541"),
        ("naïve", "%na%C3%AFve"),
    ],
)
def test_a_kafka_group_id_gets_an_encoded_folder(name: str, folder: str) -> None:
    """A group id that is no plain folder name is ``%`` and its UTF-8 bytes, escaped as %XX."""
    assert group_folder(name) == folder
    assert group_of_folder(folder) == name


@given(st.text(min_size=1, max_size=80))
def test_every_group_id_round_trips_through_one_safe_folder(name: str) -> None:
    """Any text is one folder name inside ``groups/`` (no separator, never . or .., at most 255
    bytes), and that folder reads back as the name."""
    try:
        folder = group_folder(name)
    except InvalidNameError:  # only text that is no UTF-8 (lone surrogates), or too long escaped
        surrogates = any(0xD800 <= ord(char) <= 0xDFFF for char in name)
        assert surrogates or 1 + 3 * len(name.encode("utf-8")) > 255
        return
    assert "/" not in folder
    assert "\0" not in folder
    assert folder not in {".", ".."}
    assert len(folder.encode()) <= 255
    assert group_of_folder(folder) == name


@pytest.mark.parametrize("folder", ["%", "%%4", "%%ZZ", "%%3a", "%billing", "%a%2", "%%C3", "%a b", "..", ".x", "-x"])
def test_a_folder_group_folder_does_not_make_is_no_group(folder: str) -> None:
    """A folder name that is not group_folder's one spelling of a name (a bad or lower-case escape, a
    plain name in disguise, a stray folder) is no group's folder."""
    assert group_of_folder(folder) is None


def test_a_group_id_too_long_for_a_folder_is_refused() -> None:
    """A name whose folder would pass 255 bytes is refused with a reason, not cut short."""
    with pytest.raises(InvalidNameError, match="255"):
        group_folder(":" * 90)
    with pytest.raises(InvalidNameError):
        group_folder("")
