# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/store_behaviour"
require_relative "support/foreign_files"
require "tmpdir"

# The file store on a real directory (spec/STORES.md §7).
class FileStoreTest < Minitest::Test
  include StoreBehaviour
  include ForeignFiles
  include KeySafety
  include StoreInterop

  def setup
    @dir = Dir.mktmpdir("larder-rb-files-")
  end

  def teardown
    super
    FileUtils.rm_rf(@dir)
  end

  def store_url
    "file://#{@dir}"
  end

  def unreachable_url
    nil
  end

  # The value in the file named for a key's wire bytes (KeySafety), whose header must hold exactly those bytes.
  def wire_value(bytes)
    hash = Digest::SHA256.hexdigest(bytes)
    path = File.join(@dir, hash[0, 2], hash[2, 2], hash)
    return nil unless File.exist?(path)

    raw = File.binread(path)
    length = raw.unpack1("@12S<")
    assert_equal bytes.b, raw.byteslice(14, length), "the file's header holds the wire bytes"
    raw.byteslice((14 + length)..)
  end

  def test_files_follow_the_specs_layout
    key = unique("layout")
    data = entry("v", ttl_ms: 60_000)
    store.set(key, data)
    hash = Digest::SHA256.hexdigest(key)
    bytes = File.binread(File.join(@dir, hash[0, 2], hash[2, 2], hash))
    assert_equal "LDR1".b + [Larder.decode(data).expires_at, key.bytesize].pack("Q<S<") + key.b + data, bytes
  end

  # spec/STORES.md §7, "A file store deletes only files it wrote": links (to a file and to a directory outside the
  # root), misnamed files, files without the magic, with a key length that does not fit or a key that does not hash
  # to their name, are foreign: clear, purges and capacity eviction leave them (and what links point to) alone, and
  # stats counts them.
  def test_foreign_files_and_links_are_never_deleted
    outside = Dir.mktmpdir("larder-rb-outside-")
    precious = File.join(outside, "precious.txt")
    File.write(precious, "keep me")
    elsewhere = Larder::Stores::File.new(File.join(outside, "store"))
    elsewhere.set("linked", entry("outside the root"))
    foreign = plant_foreign_files(precious, File.join(outside, "store", sha("linked")[0, 2]))
    keys_beside_the_link(5).each_with_index { |key, i| store.set(key, entry(i, tags: ["t"])) }
    assert_equal({ files: 5, foreign_files: foreign.size }, store.stats.slice(:files, :foreign_files))
    delete_all_ways
    foreign.each { |path| assert File.symlink?(path) || File.exist?(path), "#{path} was deleted" }
    assert_equal "keep me", File.read(precious)
    assert_equal "outside the root", Larder.decode(elsewhere.get("linked")).value
    assert_equal({ files: 0, foreign_files: foreign.size }, store.stats.slice(:files, :foreign_files))
  ensure
    FileUtils.rm_rf(outside) if outside
  end

  # Reads open files with O_NOFOLLOW and refuse shard directories that are links; a write through a linked shard
  # directory is refused rather than written outside the root. (The two keys' hashes start 61… and 54….)
  def test_reads_and_writes_do_not_follow_links
    outside = Dir.mktmpdir("larder-rb-outside-")
    elsewhere = Larder::Stores::File.new(outside)
    %w[file-link dir-link].each { |key| elsewhere.set(key, entry("outside #{key}")) }
    File.symlink(File.join(outside, sha("file-link")[0, 2], sha("file-link")[2, 2], sha("file-link")),
                 own_path("file-link"))
    File.symlink(File.join(outside, sha("dir-link")[0, 2]), File.join(@dir, sha("dir-link")[0, 2]))
    assert_nil store.get("file-link"), "a link to a file is a miss"
    refute store.delete("file-link")
    assert_nil store.get("dir-link"), "a file under a linked directory is a miss"
    assert_raises(Larder::StoreError) { store.set("dir-link", entry("through the link")) }
    %w[file-link dir-link].each { |key| assert_equal "outside #{key}", Larder.decode(elsewhere.get(key)).value }
  ensure
    FileUtils.rm_rf(outside) if outside
  end

  # Issue 32, finding 2 (spec/STORES.md §7, "Links are never followed below the root"): a link at the first shard
  # level, the second, or the entry's name leads to a file of the store's own form for its key, so a store that
  # followed it would read a hit, delete it, or create a file beside it. No operation does any of these.
  def test_a_link_in_any_component_is_followed_by_no_operation
    %w[first second entry].each do |level|
      outside = Dir.mktmpdir("larder-rb-outside-")
      key = "linked-#{level}"
      hash = sha(key)
      FileUtils.mkdir_p(File.join(outside, hash[2, 2]))
      planted, link = plant_link(level, hash, outside)
      File.binwrite(planted, "LDR1".b + [0, key.bytesize].pack("Q<S<") + key.b + "planted".b)
      before = Dir.glob("#{outside}/**/*", File::FNM_DOTMATCH).sort
      every_operation_refuses(key)
      assert File.symlink?(link), "#{level}: the link is left as it is"
      assert_equal "planted", File.binread(planted).byteslice(14 + key.bytesize, 7), "#{level}: its target untouched"
      assert_equal before, Dir.glob("#{outside}/**/*", File::FNM_DOTMATCH).sort, "#{level}: a file made behind it"
    ensure
      FileUtils.rm_rf(outside) if outside
    end
  end

  # [the planted file, the link] for a link at `level` (first or second shard directory, or the entry).
  def plant_link(level, hash, outside)
    case level
    when "first"
      File.symlink(outside, File.join(@dir, hash[0, 2]))
      [File.join(outside, hash[2, 2], hash), File.join(@dir, hash[0, 2])]
    when "second"
      FileUtils.mkdir_p(File.join(@dir, hash[0, 2]))
      File.symlink(outside, File.join(@dir, hash[0, 2], hash[2, 2]))
      [File.join(outside, hash), File.join(@dir, hash[0, 2], hash[2, 2])]
    else
      File.symlink(File.join(outside, "precious"), own_path(key_of(hash)))
      [File.join(outside, "precious"), own_path(key_of(hash))]
    end
  end

  def key_of(hash)
    %w[linked-first linked-second linked-entry].find { |key| sha(key) == hash }
  end

  def every_operation_refuses(key)
    assert_nil store.get(key), "#{key}: get read through the link"
    assert_equal [nil], store.get_many([key])
    assert_raises(Larder::StoreError) { store.set(key, "mine") }
    assert_raises(Larder::StoreError) { store.set_many({ key => "mine" }) }
    assert_equal 0, store.delete_many([key])
    assert_raises(Larder::StoreError) { store.add(key, "mine") }
    assert_raises(Larder::StoreError) { store.incr(key, 1) }
    refute store.delete(key), "#{key}: a delete through a link is a no-op"
    refute store.delete_if(key, "planted"), "#{key}: delete_if through a link is a no-op"
    store.purge_prefix("")
    store.purge_tag("t")
    store.clear
    assert_equal 0, store.stats[:files]
  end

  # Issue 32, finding 6: values were created 0644 and directories 0755, so a cache of private pages was
  # world-readable. Files are 0600 and directories 0700 unless `mode=` says otherwise; the umask may narrow them.
  def test_files_are_the_owners_alone_unless_mode_says_otherwise
    mask = File.umask
    [["", 0o600, 0o700], ["?mode=0640", 0o640, 0o750]].each do |option, file_mode, dir_mode|
      root = File.join(Dir.mktmpdir("larder-rb-mode-"), "cache")
      files = Larder::Stores.open("file://#{root}#{option}")
      files.set("k", "v")
      files.add("a", "v")
      path = File.join(root, sha("k")[0, 2], sha("k")[2, 2], sha("k"))
      lock = File.join(root, sha("a")[0, 2], sha("a")[2, 2], ".lock")
      mode = ->(p) { File.stat(p).mode & 0o7777 }
      assert_equal [dir_mode & ~mask] * 3, [root, File.dirname(path, 2), File.dirname(path)].map(&mode)
      assert_equal [file_mode & ~mask] * 2, [path, lock].map(&mode), option
    ensure
      FileUtils.rm_rf(File.dirname(root)) if root
    end
    %w[0400 0200 4600 0680 60 00600 rw].each do |bad|
      assert_raises(Larder::UrlError, bad) { Larder::Stores.open("file://#{@dir}?mode=#{bad}") }
    end
  end

  # Fresh keys whose shard is not the linked directory (a write there is refused: it never goes through a link).
  def keys_beside_the_link(count)
    (0..).lazy.map { |i| unique("mine-#{i}") }.reject { |key| sha(key)[0, 2] == sha("linked")[0, 2] }.first(count)
  end

  # Every operation that deletes files by scanning: purges, clear, capacity eviction.
  def delete_all_ways
    store.purge_tag("t")
    store.set("again", entry("again"))
    store.purge_prefix("")
    store.set("again", entry("again"))
    store.clear
    capped = Larder::Stores::File.new(@dir, capacity: 1)
    capped.set("again", entry("x" * 100))
    capped.send(:sweep)
    capped.purge_prefix("")
  end

  def test_two_processes_share_a_counter
    key = unique("shared-counter")
    pids = Array.new(2) do
      fork do
        other = Larder::Stores.open(store_url)
        50.times { other.incr(key, 1) }
        exit!(0)
      ensure
        exit!(1) # never the parent's at_exit handlers (minitest's run, stopping the servers) in the child
      end
    end
    pids.each { |pid| Process.wait(pid) }
    assert_equal 100, store.incr(key, 0)
  end
end

# The memory store (bounded, thread-safe).
class MemoryStoreTest < Minitest::Test
  include StoreBehaviour
  include KeySafety

  def store_url
    "memory://?capacity=16M"
  end

  def unreachable_url
    nil
  end

  def test_prefix_option_separates_applications
    assert_raises(Larder::UrlError) { Larder::Stores.open("memory://?prefix=a:") }
  end

  def test_capacity_bounds_bytes_evicting_least_recently_used
    small = Larder::Stores.open("memory://?capacity=10K")
    keys = Array.new(30) { |i| "k#{i}" }
    small.set("keep", "x" * 100)
    keys.each do |key|
      small.set(key, "y" * 1000)
      small.get("keep")
    end
    assert_operator small.bytes, :<=, 10 * 1024
    assert small.get("keep"), "the most recently used item stays"
    assert_nil small.get("k0")
    assert_raises(Larder::TooLarge) { small.set("huge", "z" * 20_000) }
  end

  def test_threads_share_it_safely
    key = "threads"
    shared = store # one store for every thread: `store` memoizes with ||=, which threads could race
    Array.new(8) { Thread.new { 200.times { shared.incr(key, 1) } } }.each(&:join)
    assert_equal 1600, shared.incr(key, 0)
  end
end
