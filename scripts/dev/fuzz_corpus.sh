#!/usr/bin/env bash
# fuzz_corpus.sh - seed corpus and dictionary for tests/fuzz_mmio.c (libFuzzer).
# usage: scripts/dev/fuzz_corpus.sh DIR   writes DIR/corpus/* and DIR/mmio.dict
# Seeds: the matrices in data/ (their first 4 KiB: libFuzzer's inputs are
# short; the .gz one whole) and one small file per feature of the format.
set -euo pipefail
out=${1:?usage: $0 DIR}
here=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$out/corpus"
mkdir -p "$out/corpus"
for f in "$here"/data/*.mtx; do head -c 4096 "$f" >"$out/corpus/$(basename "$f")"; done
for f in "$here"/data/*.gz; do cp "$f" "$out/corpus/"; done

seed() { printf '%b' "$2" >"$out/corpus/$1"; }
B='%%MatrixMarket matrix'
seed real_general      "$B coordinate real general\n% comment\n3 3 4\n1 1 1.5\n2 3 -2.5e-3\n3 2 4\n3 3 1e10\n"
seed integer_general   "$B coordinate integer general\n2 2 3\n1 1 7\n2 1 -3\n2 2 +12\n"
seed pattern_general   "$B coordinate pattern general\n2 2 3\n1 1\n1 2\n2 2\n"
seed real_symmetric    "$B coordinate real symmetric\n3 3 4\n1 1 4\n2 1 -1\n2 2 4\n3 2 -1\n"
seed pattern_symmetric "$B coordinate pattern symmetric\n3 3 3\n1 1\n3 1\n2 2\n"
seed skew_symmetric    "$B coordinate real skew-symmetric\n3 3 3\n2 1 1\n3 1 -2\n3 2 0.5\n"
seed skew_zero_diag    "$B coordinate real skew-symmetric\n2 2 2\n1 1 0\n2 1 3\n"
seed integer_symmetric "$B coordinate integer symmetric\n2 2 3\n1 1 2\n2 1 1\n2 2 2\n"
seed duplicates        "$B coordinate real general\n2 2 4\n1 1 1\n1 1 2\n2 2 1\n2 2 1e308\n"
seed crlf_blanks       "$B coordinate real general\r\n\r\n% c\r\n  2 2 2 \r\n 1 1  1.0\r\n\t2\t2\t2\r\n"
seed bom               "\xef\xbb\xbf$B coordinate real general\n1 1 1\n1 1 1\n"
seed no_final_newline  "$B coordinate real general\n2 2 2\n1 1 1\n2 2 2"
seed value_forms       "$B coordinate real general\n8 1 8\n1 1 1.\n2 1 .5\n3 1 -0\n4 1 1E+05\n5 1 1e-300\n6 1 0.1000000000000000055511151231257827\n7 1 9007199254740993\n8 1 2.2250738585072014e-308\n"
seed long_digits       "$B coordinate real general\n1 1 1\n1 1 000000000000000000000012345678901234567890.123456789e-20\n"
seed array_vector      "$B array real general\n3 1\n1\n-2.5\n3e2\n"
seed array_row_vector  "$B array real general\n1 3\n1\n2\n3\n"
seed coord_vector      "$B coordinate real general\n4 1 2\n1 1 5\n3 1 -1\n"
seed array_matrix      "$B array real general\n2 2\n1\n2\n3\n4\n"
seed rectangular       "$B coordinate real general\n2 3 3\n1 1 1\n2 3 2\n1 2 3\n"
seed header_lie_rows   "$B coordinate real general\n100000000 100000000 2\n1 1 1\n2 2 1\n"
seed header_lie_nnz    "$B coordinate real general\n1000 1000 999999\n1 1 1\n2 2 1\n"
seed empty_matrix      "$B coordinate real general\n0 0 0\n"
gzip -c "$out/corpus/real_symmetric" >"$out/corpus/real_symmetric.gz"
gzip -c "$out/corpus/array_vector" >"$out/corpus/array_vector.gz"

cat >"$out/mmio.dict" <<'DICT'
"%%MatrixMarket"
"matrix"
"vector"
"coordinate"
"array"
"real"
"integer"
"pattern"
"complex"
"general"
"symmetric"
"skew-symmetric"
"hermitian"
"\x0a"
"\x0d\x0a"
"% "
"e-"
"E+"
"e-308"
"e-324"
"e308"
"2147483647"
"2147483648"
"4294967296"
"9007199254740993"
"0."
".5"
"nan"
"inf"
"0x1p3"
"\x1f\x8b\x08"
DICT
