"""FileIO on real files under tmp_path: atomic writes, no-clobber writes, reads, listings, URIs and errors."""

from __future__ import annotations

import os

import pyarrow.fs as pafs
import pytest

from storage import FileAlreadyExists, FileError, FileNotFound, LogError


def test_write_bytes_creates_parents_and_replaces_atomically(io, tmp_path):
    target = tmp_path / "t" / "metadata" / "version-hint.text"
    io.write_bytes(str(target), b"1")
    io.write_bytes(str(target), b"22", fsync=True)
    assert target.read_bytes() == b"22"
    assert io.read_bytes(target) == b"22"
    assert os.listdir(target.parent) == ["version-hint.text"]  # no temporary file left behind
    for data in (b"4", b"", b"x" * 70_000, b"5"):  # blocks allocated ahead for exactly what is written
        io.write_bytes(str(target), data)
        assert target.read_bytes() == data and os.path.getsize(target) == len(data)


def test_write_new_refuses_to_replace_and_leaves_the_file_untouched(io, tmp_path):
    target = tmp_path / "metadata" / "v1.metadata.json"
    io.write_new(target, b"first", fsync=True)
    with pytest.raises(FileAlreadyExists) as info:
        io.write_new(target, b"second")
    assert info.value.path == str(target)
    assert str(info.value) == f"Cannot write file: {str(target)!r} already exists"
    assert target.read_bytes() == b"first"
    assert os.listdir(target.parent) == ["v1.metadata.json"]


def test_file_uris_name_local_paths(io, tmp_path):
    """The path as written, a ``%`` included, as Hadoop's local file system, PyIceberg and DuckDB take a file URI
    (Iceberg escapes partition values in file names: ``cat=a%3Ab`` is the folder's name)."""
    target = tmp_path / "a dir" / "cat=a%3Ab" / "f.avro"
    uri = "file://" + str(target)
    io.write_new(uri, b"avro")
    assert target.read_bytes() == b"avro"
    assert io.read_bytes(uri) == b"avro"
    assert io.fs_path(uri) == str(target)
    assert io.fs_path("file://localhost" + str(target)) == str(target)
    assert io.size(uri) == 4 and io.exists(uri)
    assert io.list_dir("file://" + str(tmp_path) + "/a dir/") == ["file://" + str(tmp_path) + "/a dir/cat=a%3Ab"]
    assert not io.exists("file://" + str(tmp_path) + "/a dir/cat=a:b/f.avro")


def test_relative_paths_resolve_against_the_working_directory(io, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    io.write_bytes("rel/x.bin", b"x")
    assert io.fs_path("rel/x.bin") == str(tmp_path / "rel" / "x.bin")
    assert (tmp_path / "rel" / "x.bin").read_bytes() == b"x"


@pytest.mark.parametrize("location", ["s3://bucket/key", "gs://bucket/key", "file://otherhost/x", "hdfs:///x"])
def test_other_locations_are_refused(io, location):
    with pytest.raises(FileError, match="Cannot use location") as info:
        io.read_bytes(location)
    assert info.value.path == location


def test_exists_size_delete_list_makedirs(io, tmp_path):
    directory = tmp_path / "data" / "part=1"
    io.makedirs(directory)
    io.makedirs(directory)
    assert io.exists(directory) and io.list_dir(directory) == []
    assert io.list_dir(str(tmp_path)) == [str(tmp_path / "data")]
    io.write_bytes(directory / "b.parquet", b"bb")
    io.write_bytes(directory / "a.parquet", b"a")
    io.makedirs(directory / "sub")
    assert io.list_dir(directory) == [str(directory / name) for name in ("a.parquet", "b.parquet", "sub")]
    assert io.size(directory / "b.parquet") == 2
    io.delete(directory / "a.parquet")
    assert not io.exists(directory / "a.parquet")
    assert io.list_dir(directory) == [str(directory / "b.parquet"), str(directory / "sub")]


def test_missing_files_raise_file_not_found_naming_the_path(io, tmp_path):
    missing = str(tmp_path / "missing")
    for call, action in [(io.read_bytes, "read"), (io.delete, "delete"), (io.list_dir, "list"),
                         (io.size, "inspect")]:
        with pytest.raises(FileNotFound) as info:
            call(missing)
        assert info.value.path == missing
        assert str(info.value) == f"Cannot {action} file: {missing!r} does not exist"
        assert isinstance(info.value, LogError)
    assert not io.exists(missing)


def test_directories_are_not_files(io, tmp_path):
    with pytest.raises(FileError, match="Cannot read file"):
        io.read_bytes(tmp_path)
    with pytest.raises(FileError, match="is not a file"):
        io.size(tmp_path)


def test_filesystem_reads_what_fileio_wrote(io, tmp_path):
    io.write_bytes(tmp_path / "x.bin", b"payload")
    assert isinstance(io.filesystem, pafs.LocalFileSystem)
    with io.filesystem.open_input_file(io.fs_path(tmp_path / "x.bin")) as f:
        assert f.read() == b"payload"


def test_write_fresh_writes_in_place_replaces_a_repeat_and_never_follows_a_link(io, tmp_path):
    target = tmp_path / "meta" / "snap-1.avro"
    io.write_fresh(str(target), b"first")  # creates the folder
    assert target.read_bytes() == b"first"
    assert [p.name for p in target.parent.iterdir()] == ["snap-1.avro"]  # no temporary file left
    io.write_fresh(str(target), b"again")  # the same write repeated after a crash
    assert target.read_bytes() == b"again"
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not the table's")
    link = tmp_path / "meta" / "snap-2.avro"
    os.symlink(outside, link)
    io.write_fresh(str(link), b"manifest")
    assert outside.read_bytes() == b"not the table's"
    assert not link.is_symlink() and link.read_bytes() == b"manifest"
