#!/usr/bin/env bash
# Renders testdata/ppocr/two_lines.pgm, the image tests/_ocr_checks.ts reads:
# two lines of DejaVu Sans (Debian's fonts-dejavu-core) by ImageMagick
# (Debian's imagemagick), grey, 320×96. Committed, so the tests need neither.
set -euo pipefail
cd "$(dirname "$0")/.."
convert -size 320x96 xc:white -font DejaVu-Sans -pointsize 26 -fill black \
  -annotate +14+38 'Hello relaxvm' -annotate +14+80 'PP-OCRv4 2026' \
  -colorspace Gray -depth 8 pgm:testdata/ppocr/two_lines.pgm
