# frozen_string_literal: true

# The values the Ruby benchmarks cache (issue 34): what a Rails app stores, not only Strings. Every shape is built
# from a seeded Random, so each run and each store gets the same bytes.
#
# - text: HTML-like text of 1 KiB and 64 KiB (a fragment), as the earlier benchmarks used;
# - page: a rendered page (a UTF-8 String with some multi-byte text, about 24 KiB);
# - query: a query result as `Model.where(…).as_json` or `pluck` gives it, a Hash holding an Array of small Hashes
#   with String keys (Integers, Strings, Floats, nil, booleans, dates as Strings), about 1 KiB (16 rows)
#   and 64 KiB (1,100 rows) once packed;
# - document: a nested document (a product with variants, options, reviews, SEO fields), about 5 KiB.
module BenchValues
  WORDS = %w[<div class="product"> <span> </span> price name stock available <a href="/p/ "> </a> </div>
             shipping].freeze
  NAMES = %w[Anna Bernard Chloé Dmitri Élodie François Grace Hiroshi Inès Jakub Kofi Lena Mateo Noor Oskar Priya].freeze

  module_function

  # name => value
  def all
    { "text 1K" => text(1024), "text 64K" => text(65_536), "page 24K" => page, "query 1K" => query(16),
      "query 64K" => query(1100), "document 5K" => document }
  end

  def text(size)
    random = Random.new(size)
    out = +""
    out << WORDS[random.rand(WORDS.size)] << " " << random.rand(100_000).to_s << " " while out.bytesize < size
    out.byteslice(0, size)
  end

  def page
    random = Random.new(24)
    out = +"<!DOCTYPE html><html lang=\"fr\"><head><meta charset=\"utf-8\">" \
           "<title>Catalogue — Maison</title></head><body>"
    while out.bytesize < 24_000
      name = NAMES[random.rand(NAMES.size)]
      out << "<article class=\"card\" data-id=\"#{random.rand(1_000_000)}\">" \
             "<h2>Produit n° #{random.rand(10_000)}</h2>" \
             "<p>Vendu par #{name}, livré en #{random.rand(2..9)} jours — #{format('%.2f', random.rand * 500)} €</p>" \
             "<a href=\"/produits/#{random.rand(100_000)}\">Voir</a></article>\n"
    end
    out << "</body></html>"
  end

  # One row as `as_json` gives it, about 60 bytes packed (the issue's 1,100 rows in 64 KiB).
  def row(random, id)
    { "id" => id, "name" => "#{NAMES[random.rand(NAMES.size)]} #{random.rand(100)}",
      "price" => (random.rand * 1000).round(2), "qty" => random.rand(500), "active" => random.rand(2).zero?,
      "ended" => random.rand(8).zero? ? "2026-11-#{10 + random.rand(18)}" : nil }
  end

  def query(rows)
    random = Random.new(rows)
    { "rows" => Array.new(rows) { |index| row(random, 1000 + index) }, "total" => rows * 7, "page" => 1,
      "per_page" => rows, "next" => "/api/users?page=2" }
  end

  def document
    random = Random.new(6)
    variants = Array.new(24) do |index|
      { "sku" => "SKU-#{random.rand(1_000_000)}", "size" => %w[XS S M L XL][index % 5], "price" => 19.9 + index,
        "stock" => { "warehouse" => random.rand(100), "store" => random.rand(20), "incoming" => nil },
        "images" => Array.new(3) { |i| { "url" => "/img/#{random.rand(100_000)}-#{i}.jpg", "w" => 800, "h" => 600 } } }
    end
    reviews = Array.new(8) do
      { "author" => NAMES[random.rand(NAMES.size)], "rating" => random.rand(1..5), "verified" => random.rand(2).zero?,
        "text" => "Très bon produit, conforme à la description. #{random.rand(10_000)}", "helpful" => random.rand(40) }
    end
    { "id" => 42, "title" => "Veste légère imperméable", "brand" => { "name" => "Maison", "country" => "FR" },
      "tags" => %w[veste pluie été léger], "published" => true, "rating" => 4.6, "discount" => nil,
      "variants" => variants, "reviews" => reviews,
      "seo" => { "title" => "Veste légère", "description" => "Une veste légère pour la pluie d'été." * 3,
                 "keywords" => %w[veste pluie mode] } }
  end
end
