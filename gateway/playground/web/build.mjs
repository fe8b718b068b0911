// Bundles the playground into ../dist (or --outdir DIR): dist/index.html plus
// content-hashed assets under dist/assets/. The output depends only on the
// sources and the locked dependencies, so a rebuild can be compared byte for
// byte with the committed dist.
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import * as esbuild from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { outdir: { type: 'string' } } });
const outdir = path.resolve(values.outdir || path.join(here, '..', 'dist'));
const assets = path.join(outdir, 'assets');

await rm(outdir, { recursive: true, force: true });
await mkdir(assets, { recursive: true });

const result = await esbuild.build({
  absWorkingDir: here,
  entryPoints: ['src/main.js'],
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022', 'chrome111', 'firefox113', 'safari16.4'],
  minify: true,
  sourcemap: false,
  legalComments: 'eof',
  charset: 'utf8',
  outdir: assets,
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  metafile: true,
  logLevel: 'warning',
});

let script = '';
let stylesheet = '';
for (const [file, info] of Object.entries(result.metafile.outputs)) {
  if (info.entryPoint === 'src/main.js') {
    script = file;
    stylesheet = info.cssBundle || '';
  }
}
if (!script || !stylesheet) throw new Error('build: the bundle or its stylesheet is missing');

const url = (file) => `/assets/${path.basename(file)}`;
const template = await readFile(path.join(here, 'src', 'index.html'), 'utf8');
const html = template.replace('%SCRIPT%', url(script)).replace('%STYLESHEET%', url(stylesheet));
await writeFile(path.join(outdir, 'index.html'), html);

const written = [...Object.keys(result.metafile.outputs).map((f) => `assets/${path.basename(f)}`).sort(), 'index.html'];
console.log(`wrote ${outdir}: ${written.join(', ')}`);
