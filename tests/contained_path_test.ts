/**
 * The one path rule of every loader (ground/contained_path.ts): what a
 * package or a program's tensor-cache index may write as a file's path, and
 * what a granted URL may add to its root.
 */

import { assert, assertEquals, assertThrows } from "@std/assert";
import { MAX_PATH_LENGTH, pathOutside, siblingPath, urlWithin } from "../ground/contained_path.ts";

Deno.test("pathOutside: plain relative paths pass, spaces and encoded letters too", () => {
  for (
    const path of [
      "a.bin",
      "params/params_shard_0.bin",
      "a b.bin",
      "a%20b.bin",
      "%41.bin",
      "...",
      "a..b",
      "x/.hidden",
    ]
  ) {
    assertEquals(pathOutside(path), null, path);
  }
});

Deno.test("pathOutside: every way out is refused, at any depth of encoding", () => {
  const refused: [string, string][] = [
    ["", "is empty"],
    ["x".repeat(MAX_PATH_LENGTH + 1), `is longer than ${MAX_PATH_LENGTH} characters`],
    ["../x", "climbs out of its directory (a .. segment)"],
    ["a/../../x", "climbs out"],
    ["%2e%2e/x", "climbs out of its directory (a .. segment), once decoded"],
    ["%2E%2e/x", "once decoded"],
    [".%2E/x", "once decoded"],
    ["..%2fx", "once decoded"],
    ["..%2Fx", "once decoded"],
    ["%252e%252e/x", "once decoded"],
    ["%25252e%25252e/x", "once decoded"],
    ["%2525252e%2525252e/x", "is percent-encoded more than 3 times over"],
    ["..\\x", "holds a backslash, a control character, ? or #"],
    ["..%5cx", "holds a backslash"],
    ["..%5Cx", "holds a backslash"],
    ["x\u0000", "holds a backslash, a control character"],
    ["x%00", "once decoded"],
    ["x%0a", "once decoded"],
    ["x?y", "? or #"],
    ["x#y", "? or #"],
    ["/etc/passwd", "is absolute"],
    ["%2fetc/passwd", "is absolute, once decoded"],
    ["file:///etc/passwd", "names a scheme or a drive"],
    ["https://example.com/x", "names a scheme"],
    ["C:x", "names a scheme or a drive"],
    ["a//b", "has an empty or . segment"],
    ["a/", "has an empty or . segment"],
    ["./a", "has an empty or . segment"],
    ["a/%2e/b", "has an empty or . segment, once decoded"],
    ["%zz", "is not valid percent-encoding"],
  ];
  for (const [path, reason] of refused) {
    const got = pathOutside(path);
    assert(got !== null && got.includes(reason), `${JSON.stringify(path)}: ${got}`);
  }
});

Deno.test("siblingPath joins to the directory of its index, and refuses what pathOutside refuses", () => {
  assertEquals(siblingPath("params/index.json", "shard_0.bin"), "params/shard_0.bin");
  assertEquals(siblingPath("index.json", "shard_0.bin"), "shard_0.bin");
  assertThrows(() => siblingPath("params/index.json", "%2e%2e/x"), RangeError, "climbs out");
});

Deno.test("urlWithin: under the root by the same rule, decoded", () => {
  const root = new URL("file:///models/gpt/");
  const within = (href: string) => urlWithin(root, new URL(href));
  assert(within("file:///models/gpt/a.bin"));
  assert(within("file:///models/gpt/sub/a.bin"));
  assert(urlWithin(new URL("file:///models/gpt"), new URL("file:///models/gpt/a.bin")));
  assert(urlWithin(new URL("file:///m/%5Bx%5D/"), new URL("file:///m/[x]/a.bin")));
  assert(!within("file:///models/gpt/"), "the root is not under itself");
  assert(!within("file:///models/gpt-evil/a.bin"), "a sibling that shares a prefix");
  assert(!within("file:///models/gpt/..%2f..%2fetc/passwd"), "an encoded slash");
  assert(!within("file:///models/gpt/%252e%252e/x"), "double encoding");
  assert(!within("file:///models/gpt/a%00.bin"), "NUL");
  assert(!within("file:///models/gpt/a%5c..%5cx"), "an encoded backslash");
  assert(!within("https://host/models/gpt/a.bin"), "another scheme");
  const web = new URL("https://host/models/");
  assert(urlWithin(web, new URL("https://host/models/a.bin")));
  assert(!urlWithin(web, new URL("https://other/models/a.bin")), "another host");
  assert(!urlWithin(web, new URL("https://user@host/models/a.bin")), "other credentials");
});
