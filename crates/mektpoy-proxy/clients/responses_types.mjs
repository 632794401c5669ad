// Checks that the official `openai` TypeScript SDK's Responses types accept every body
// mektpoy's Responses serializer writes: writes one TypeScript file assigning each `*.json` of
// the directory given to `ResponseCreateParamsNonStreaming` (as a `const` literal, so excess
// properties and literal types are checked), then runs `tsc --noEmit --strict` on it.
//
//   node responses_types.mjs <bodies dir> <npm dir holding openai and typescript>
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execFileSync } from "node:child_process";

const [dir, npm] = process.argv.slice(2);
const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
if (files.length === 0) throw new Error(`no bodies in ${dir}`);
let src = 'import type { ResponseCreateParamsNonStreaming } from "openai/resources/responses/responses";\n';
files.forEach((f, i) => {
  const body = readFileSync(join(dir, f), "utf8");
  src += `// ${f}\nexport const body${i}: ResponseCreateParamsNonStreaming = ${body};\n`;
});
const file = join(npm, "responses_bodies.ts");
writeFileSync(file, src);
try {
  execFileSync(
    join(npm, "node_modules/.bin/tsc"),
    ["--noEmit", "--strict", "--skipLibCheck", "--target", "es2022", "--module", "nodenext",
      "--moduleResolution", "nodenext", file],
    { cwd: npm, stdio: "inherit" },
  );
} catch {
  console.error(`tsc refused some of the ${files.length} bodies (see above; ${file})`);
  process.exit(1);
}
console.log(`${files.length} of ${files.length} bodies accepted by openai (TypeScript) ResponseCreateParamsNonStreaming`);
