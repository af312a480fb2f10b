// Differential oracle for tests/test_jsjson.py: reads JSON texts from stdin, one per "\n"-separated line,
// and writes one line per text: "=" + JSON.stringify(JSON.parse(text)), or "!" + the parse error.
// Splits on "\n" only: U+2028/U+2029 stay raw inside a line (stringify escapes "\n", never U+2028).
import { readFileSync } from 'node:fs';

const input = readFileSync(0, 'utf8');
const texts = input.split('\n');
if (texts.at(-1) === '') texts.pop();
const results = texts.map((text) => {
  try {
    return '=' + JSON.stringify(JSON.parse(text));
  } catch (error) {
    return '!' + String(error.message).replaceAll('\n', ' ');
  }
});
process.stdout.write(results.join('\n') + '\n');
