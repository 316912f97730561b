"""The build backend of the dtq client (PEP 517, with the editable hooks of
PEP 660), standard library only.

The client is one module, dtq.py, without dependencies; a wheel of it is a
zip of that file and its metadata. Building it with this backend rather
than setuptools means `pip install --no-build-isolation ./clients/python`
works offline on any Python the client supports, with or without
setuptools in the environment (venvs of Python 3.12 and later have none).

The metadata comes from pyproject.toml's [project] table; the wheel's
files are dated 1980-01-01, so one source builds one wheel, byte for byte.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_MODULES = ["dtq.py"]
_SDIST_FILES = ["pyproject.toml", "README.md", "dtq.py", "_backend/dtq_build.py"]
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold


def _project():
    """pyproject.toml's [project] table. tomllib reads it on Python 3.11
    and later; before that, a reader of the `key = "value"` lines this
    file's table is written with (no tables inside, no multi-line values)."""
    path = os.path.join(_HERE, "pyproject.toml")
    try:
        import tomllib
    except ImportError:
        tomllib = None
    if tomllib is not None:
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    project, section = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]").strip()
                continue
            m = re.match(r'^([A-Za-z0-9_-]+)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(#.*)?$', line)
            if section == "project" and m:
                project[m.group(1)] = m.group(2).replace('\\"', '"').replace("\\\\", "\\")
    return project


def _names():
    p = _project()
    name, version = p["name"], p["version"]
    # The wheel's file names use the normalized name (PEP 427, PEP 503).
    dist = re.sub(r"[-_.]+", "_", name).lower()
    return p, name, version, dist


def _metadata():
    """The core metadata (METADATA / PKG-INFO) of the project."""
    p, name, version, _ = _names()
    lines = ["Metadata-Version: 2.1", "Name: " + name, "Version: " + version]
    if p.get("description"):
        lines.append("Summary: " + p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: " + p["requires-python"])
    lic = p.get("license")
    if isinstance(lic, str):
        lines.append("License: " + lic)
    body = ""
    readme = p.get("readme")
    if isinstance(readme, str):
        with open(os.path.join(_HERE, readme), encoding="utf-8") as f:
            body = f.read()
        lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + body


def _dist_info():
    _, _, version, dist = _names()
    return "%s-%s.dist-info" % (dist, version)


def _wheel_name():
    _, _, version, dist = _names()
    return "%s-%s-py3-none-any.whl" % (dist, version)


def _digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def _write_wheel(wheel_directory, files):
    """Writes a wheel of files ({path in the wheel: bytes}) and its
    dist-info; returns its file name."""
    info = _dist_info()
    files = dict(files)
    files[info + "/METADATA"] = _metadata().encode("utf-8")
    files[info + "/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: dtq_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[info + "/top_level.txt"] = b"dtq\n"
    record = "".join("%s,%s,%d\n" % (path, _digest(data), len(data)) for path, data in files.items())
    files[info + "/RECORD"] = (record + info + "/RECORD,,\n").encode("utf-8")
    name = _wheel_name()
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            zi = zipfile.ZipInfo(path, date_time=_EPOCH)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def _read(rel):
    with open(os.path.join(_HERE, rel), "rb") as f:
        return f.read()


def _write_metadata(metadata_directory):
    info = os.path.join(metadata_directory, _dist_info())
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return _dist_info()


# ---- the PEP 517 and PEP 660 hooks ----

def get_requires_for_build_wheel(config_settings=None):
    """Nothing: the backend needs only the standard library."""
    return []


def get_requires_for_build_sdist(config_settings=None):
    """Nothing: the backend needs only the standard library."""
    return []


def get_requires_for_build_editable(config_settings=None):
    """Nothing: the backend needs only the standard library."""
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """Writes the wheel's .dist-info/METADATA; returns the directory's name."""
    return _write_metadata(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    """As prepare_metadata_for_build_wheel."""
    return _write_metadata(metadata_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Builds the wheel (dtq.py and its metadata); returns its file name."""
    return _write_wheel(wheel_directory, {m: _read(m) for m in _MODULES})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """Builds a wheel whose .pth file puts this directory on sys.path, so
    that edits of dtq.py take effect without installing again."""
    return _write_wheel(wheel_directory, {"dtq_client.pth": (_HERE + "\n").encode("utf-8")})


def build_sdist(sdist_directory, config_settings=None):
    """Builds the source archive (the sources, this backend, PKG-INFO);
    returns its file name."""
    _, _, version, dist = _names()
    base = "%s-%s" % (dist, version)
    files = {rel: _read(rel) for rel in _SDIST_FILES}
    files["PKG-INFO"] = _metadata().encode("utf-8")
    name = base + ".tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel, data in sorted(files.items()):
            ti = tarfile.TarInfo(base + "/" + rel)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 315532800  # 1980-01-01, as the wheel
            tar.addfile(ti, io.BytesIO(data))
    return name
