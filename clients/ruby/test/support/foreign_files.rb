# frozen_string_literal: true

require "digest"
require "fileutils"

# Foreign things for the file store's tests (spec/STORES.md §7): planted in a store's root (@dir), they must survive
# every scan that deletes (clear, purges, capacity eviction) and be counted by stats as `foreign_files`.
module ForeignFiles
  # File contents at the place larder would put the file for the key: none of them is larder's.
  CONTENTS = {
    "no magic" => "not larder's".b,
    "wrong key" => "LDR1".b + [0, 5].pack("Q<S<") + "other".b + "value".b,
    "long key" => "LDR1".b + [0, 60_000].pack("Q<S<") + "long key".b
  }.freeze

  # Plants them; returns their paths. `precious` is a file outside the root, `linked_dir` a directory outside it.
  def plant_foreign_files(precious, linked_dir)
    paths = CONTENTS.map { |key, bytes| own_path(key).tap { |path| File.binwrite(path, bytes) } }
    paths << own_path("a link to a file").tap { |path| File.symlink(precious, path) }
    paths << File.join(@dir, sha("linked")[0, 2]).tap { |path| File.symlink(linked_dir, path) }
    misplaced = File.join(@dir, "ff", "ff", sha("misplaced"))
    FileUtils.mkdir_p(File.dirname(misplaced))
    File.binwrite(misplaced, "LDR1".b + [0, 9].pack("Q<S<") + "misplaced".b)
    paths << misplaced
    paths << File.join(@dir, "README").tap { |path| File.write(path, "an operator's notes") }
    paths << File.join(@dir, "notes").tap { |path| FileUtils.mkdir_p(path) }
  end

  def sha(key)
    Digest::SHA256.hexdigest(key)
  end

  # Where the file store keeps `key` (its shard directories made).
  def own_path(key)
    hash = sha(key)
    File.join(@dir, hash[0, 2], hash[2, 2], hash).tap { |path| FileUtils.mkdir_p(File.dirname(path)) }
  end
end
