"""Files an untrusted process wrote are read without following links, from the open descriptor, within a limit."""

from __future__ import annotations

import os

import pytest

from sandbox_service.worker.untrusted_files import NotARegularFile, TooLarge, copy_beneath, read_beneath


def test_a_regular_file_within_the_limit_is_read(tmp_path):
    (tmp_path / "program.json").write_bytes(b"{}")
    assert read_beneath(str(tmp_path), "program.json", 10) == b"{}"


@pytest.mark.parametrize("target", ["/dev/zero", "/etc/hostname"])
def test_a_link_is_refused_wherever_it_points(tmp_path, target):
    os.symlink(target, tmp_path / "program.json")
    with pytest.raises(NotARegularFile):
        read_beneath(str(tmp_path), "program.json", 1 << 20)


def test_a_link_on_the_folder_s_path_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "program.json").write_bytes(b"{}")
    os.symlink(tmp_path / "real", tmp_path / "linked")
    with pytest.raises(NotARegularFile):
        read_beneath(str(tmp_path / "linked"), "program.json", 10)


def test_a_fifo_neither_blocks_nor_is_read(tmp_path):
    os.mkfifo(tmp_path / "program.json")
    with pytest.raises(NotARegularFile):
        read_beneath(str(tmp_path), "program.json", 10)


def test_a_file_over_the_limit_is_refused_and_a_copy_stops_at_it(tmp_path):
    (tmp_path / "constants").write_bytes(b"x" * 100)
    with pytest.raises(TooLarge):
        read_beneath(str(tmp_path), "constants", 99)
    with pytest.raises(TooLarge):
        copy_beneath(str(tmp_path), "constants", str(tmp_path / "copy"), 99)
    copy_beneath(str(tmp_path), "constants", str(tmp_path / "copy2"), 100)
    assert (tmp_path / "copy2").read_bytes() == b"x" * 100


def test_names_that_leave_the_folder_are_refused(tmp_path):
    for name in ("../x", "a/b", "..", ""):
        with pytest.raises(NotARegularFile):
            read_beneath(str(tmp_path), name, 10)
