// Compiles every request and response body schema of an OpenAPI document the
// way prism does (its own parser, allOf merged, the ajv it ships) and exits 1
// naming each schema ajv refuses: prism skips validating such a body without
// a word (stoplightio/prism#1931). Run with NODE_PATH set to the
// node_modules that holds @stoplight/prism-cli.
'use strict';

const { getHttpOperationsFromSpec } = require('@stoplight/prism-http');

const prismHttp = require.resolve('@stoplight/prism-http');
const fromPrism = name => require(require.resolve(name, { paths: [prismHttp] }));
const Ajv = fromPrism('ajv').default;
const addFormats = fromPrism('ajv-formats').default;
const mergeAllOf = fromPrism('@stoplight/json-schema-merge-allof');

(async () => {
  const operations = await getHttpOperationsFromSpec(process.argv[2]);
  const ajv = new Ajv({ allErrors: true, allowUnionTypes: true, allowMatchingProperties: true, strict: false, logger: false });
  addFormats(ajv);
  const failures = [];
  const compile = (where, schema, bundle) => {
    if (!schema) return;
    let merged = schema;
    try {
      merged = mergeAllOf(schema, { deep: true, ignoreAdditionalProperties: true });
    } catch (e) {
      // prism validates against the schema as it is then
    }
    try {
      ajv.compile({ ...merged, __bundled__: bundle });
    } catch (e) {
      failures.push(`${where}: ${e.message}`);
    }
  };
  for (const op of operations) {
    const name = `${op.method.toUpperCase()} ${op.path}`;
    const bundle = op.__bundled__;
    for (const c of (op.request && op.request.body && op.request.body.contents) || []) {
      compile(`${name} request ${c.mediaType}`, c.schema, bundle);
    }
    for (const r of op.responses) {
      for (const c of r.contents || []) compile(`${name} ${r.code} ${c.mediaType}`, c.schema, bundle);
    }
  }
  if (operations.length === 0) failures.push('no operations found');
  if (failures.length > 0) {
    console.log(failures.join('\n'));
    process.exit(1);
  }
})().catch(e => {
  console.log(e.stack || String(e));
  process.exit(1);
});
