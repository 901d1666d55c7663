#!/usr/bin/env bash
# Build llama.cpp's own OpenAI server, llama-server, from the llama.cpp that the
# llama-cpp-python sdist of VERSION vendors, into OUT (OUT/llama-server, with the
# libraries it runs on beside it). Called once by scripts/test.sh (ensure_llama_server).
#   build-llama-server.sh PYTHON VERSION OUT
# Cheap on purpose: libllama and libggml are not compiled again, the server links
# against the ones PYTHON's llama-cpp-python wheel ships (the same llama.cpp source,
# built by scripts/test.sh for this CPU); only the server, llama.cpp's common library
# and mtmd are compiled. No tests, examples, web UI download, curl or OpenSSL.
set -euo pipefail

PY="$1" VERSION="$2" OUT="$3"
WHEEL_LIB="$("$PY" -c 'import llama_cpp, pathlib; print(pathlib.Path(llama_cpp.__file__).parent / "lib")')"
[ -f "$WHEEL_LIB/libllama.so" ] || { echo "no libllama.so in $WHEEL_LIB (llama-cpp-python not built here)" >&2; exit 1; }
"$PY" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$VERSION')" ||
    { echo "the installed llama-cpp-python is not $VERSION: its libraries would not match the source" >&2; exit 1; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PY" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$WORK" >&2
tar -xzf "$WORK"/llama_cpp_python-"$VERSION".tar.gz -C "$WORK" \
    "llama_cpp_python-$VERSION/vendor/llama.cpp" "llama_cpp_python-$VERSION/CHANGELOG.md"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
# the llama.cpp commit this version vendors, as its changelog names it (the sdist has no .git)
COMMIT="$(sed -n "/^## \[$VERSION\]/,/^## /s/.*ggml-org\/llama.cpp@\([0-9a-f]*\).*/\1/p" \
    "$WORK/llama_cpp_python-$VERSION/CHANGELOG.md" | head -n1)"

# The top-level CMakeLists with libggml and libllama imported from the wheel instead of built
# (from "# 3rd-party" to "add_subdirectory(src)"), and without its install rules.
"$PY" - "$SRC/CMakeLists.txt" <<'EOF'
import sys
path = sys.argv[1]
text = open(path).read()
start, end = text.index("#\n# 3rd-party"), text.index("add_subdirectory(src)") + len("add_subdirectory(src)")
imported = """
# libggml and libllama: the llama-cpp-python wheel's (LLAMA_WHEEL_LIB), not built here
foreach(lib ggml-base ggml-cpu ggml llama)
    add_library(${lib} SHARED IMPORTED)
    set_target_properties(${lib} PROPERTIES IMPORTED_LOCATION "${LLAMA_WHEEL_LIB}/lib${lib}.so")
endforeach()
set_target_properties(ggml PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CMAKE_CURRENT_SOURCE_DIR}/ggml/include"
                                      INTERFACE_LINK_LIBRARIES "ggml-base;ggml-cpu")
set_target_properties(llama PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CMAKE_CURRENT_SOURCE_DIR}/include"
                                       INTERFACE_LINK_LIBRARIES ggml)
"""
text = text[:start] + imported + text[end:]
text = text[:text.index("#\n# install")]
open(path, "w").write(text)
EOF

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$SRC" -B "$WORK/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLLAMA_WHEEL_LIB="$WHEEL_LIB" \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_COMMIT="${COMMIT:-unknown}" \
    -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH='$ORIGIN' >&2
cmake --build "$WORK/build" --target llama-server -j"$(nproc)" >&2

mkdir -p "$OUT"
cp -P "$WHEEL_LIB"/lib*.so* "$OUT"/
cp "$WORK/build/bin/llama-server" "$OUT/llama-server.tmp"
echo "llama-cpp-python $VERSION, llama.cpp ${COMMIT:-unknown}" >"$OUT/VERSION"
mv "$OUT/llama-server.tmp" "$OUT/llama-server"  # last: its presence says the build is whole
