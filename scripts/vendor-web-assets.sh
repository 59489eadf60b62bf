#!/usr/bin/env bash
# Refreshes the browser libraries the API ships in service/api/static/vendor (the live page's
# charts, Swagger UI and ReDoc), from the npm registry, so that nothing loads from a CDN at run
# time. Run it by hand to move to newer versions (needs npm); commit the result.
#   uplot            1.6.32  MIT         dist/uPlot.iife.min.js, dist/uPlot.min.css
#   swagger-ui-dist  5.35.0  Apache-2.0  swagger-ui-bundle.js, swagger-ui.css, favicon
#   redoc            2.5.4   MIT         bundles/redoc.standalone.js
# One patch: ReDoc's side menu shows Redocly's logo from cdn.redoc.ly; it becomes an empty
# inline image (the "API docs by Redocly" link stays).
set -euo pipefail

UPLOT=${UPLOT:-1.6.32} SWAGGER=${SWAGGER:-5.35.0} REDOC=${REDOC:-2.5.4}
out="$(cd "$(dirname "$0")/.." && pwd)/service/api/static/vendor"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
for spec in "uplot@$UPLOT" "swagger-ui-dist@$SWAGGER" "redoc@$REDOC"; do
  name=${spec%@*}
  mkdir "$name"
  tar -xzf "$(npm pack --silent "$spec")" -C "$name"
done
mkdir -p "$out/uplot" "$out/swagger-ui" "$out/redoc"
cp uplot/package/dist/uPlot.iife.min.js uplot/package/dist/uPlot.min.css uplot/package/LICENSE \
   "$out/uplot/"
(cd swagger-ui-dist/package && cp swagger-ui-bundle.js swagger-ui-bundle.js.LICENSE.txt \
   swagger-ui.css favicon-32x32.png LICENSE NOTICE "$out/swagger-ui/")
cp redoc/package/bundles/redoc.standalone.js.LICENSE.txt redoc/package/LICENSE "$out/redoc/"
logo='src:"https://cdn.redoc.ly/redoc/logo-mini.svg"'
grep -q "$logo" redoc/package/bundles/redoc.standalone.js \
  || { echo "vendor-web-assets: ReDoc's logo URL moved; update the patch" >&2; exit 1; }
sed "s#$logo#src:\"data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7\"#" \
  redoc/package/bundles/redoc.standalone.js > "$out/redoc/redoc.standalone.js"
echo "vendor-web-assets: uPlot $UPLOT, Swagger UI $SWAGGER, ReDoc $REDOC in $out"
