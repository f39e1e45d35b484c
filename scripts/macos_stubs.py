#!/usr/bin/env python3
"""Text stubs (.tbd) of the macOS frameworks convo links, so that zig links a macOS
binary on Linux without Apple's SDK (which may not be copied here).

    macos_stubs.py LLVM_NM SDKROOT FILE...

A stub names a framework's install path and symbols; at run time macOS loads the real
framework from that path. The symbols are the undefined ones of FILE... (the build's
rlibs and C archives) that carry a framework's prefix: Security's `Sec`, CoreFoundation's
`CF`, SystemConfiguration's `SC` (the three that rustls-native-certs and tokio-postgres's
user lookup use). A stub may list more than is used; a symbol missing from every stub
fails the link, so nothing wrong can get through. Written under SDKROOT as
System/Library/Frameworks/NAME.framework/NAME.tbd, where zig's linker looks."""
import pathlib
import re
import subprocess
import sys

FRAMEWORKS = {
    "Security": re.compile(r"_k?Sec[A-Z_]"),
    "CoreFoundation": re.compile(r"_k?CF[A-Z_]|__kCF|__CF"),
    "SystemConfiguration": re.compile(r"_k?SC[A-Z_]"),
}
TARGETS = "[ x86_64-macos, arm64-macos ]"


def main(nm: str, sdkroot: str, *files: str) -> None:
    listed = subprocess.run([nm, "-u", "--just-symbol-name", *files], capture_output=True, text=True, check=False)
    names = sorted({n for n in listed.stdout.split() if n.startswith("_")})
    for name, pattern in FRAMEWORKS.items():
        symbols = [s for s in names if pattern.match(s)]
        folder = pathlib.Path(sdkroot, "System/Library/Frameworks", f"{name}.framework")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.tbd").write_text(
            "--- !tapi-tbd\n"
            "tbd-version:     4\n"
            f"targets:         {TARGETS}\n"
            f"install-name:    '/System/Library/Frameworks/{name}.framework/Versions/A/{name}'\n"
            "exports:\n"
            f"  - targets:         {TARGETS}\n"
            f"    symbols:         [ {', '.join(repr(s) for s in symbols)} ]\n"
            "...\n"
        )
        print(f"macos_stubs: {name}: {len(symbols)} symbols", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:])
