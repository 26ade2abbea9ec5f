# The values of issue 34, in the shapes an Elixir application caches: source document 004's link (a map of five
# fields), a query result (a map holding a list of ~1,100 small maps, ~64 KiB as MessagePack, and one of ~1 KiB), a
# nested document, and a rendered page (a binary). Only what MessagePack and JSON both round-trip (string keys,
# integers, strings, booleans, nil, lists, maps), so every subject gives back what it was given.
defmodule Bench.Shapes do
  def link(i) do
    %{
      "id" => i,
      "slug" => Integer.to_string(i, 36),
      "long_url" => "http://www.example.com/articles/2016/07/make-phoenix-even-faster",
      "inserted_at" => "2016-07-13T12:00:00Z",
      "updated_at" => "2016-07-13T12:00:00Z"
    }
  end

  def query(rows) do
    %{
      "count" => rows,
      "next" => nil,
      "results" =>
        for i <- 1..rows do
          %{
            "id" => i,
            "title" => "Article number #{i}",
            "author_id" => rem(i * 7919, 997),
            "published" => rem(i, 3) != 0,
            "votes" => rem(i * 31, 500)
          }
        end
    }
  end

  def document do
    para = fn i -> String.duplicate("Words of paragraph #{i}, ", 8) end

    %{
      "id" => 4242,
      "title" => "A nested document: an article with its author, sections and comments",
      "author" => %{
        "id" => 7,
        "name" => "Ada Lovelace",
        "bio" => para.(0),
        "links" => ["https://example.com/ada"]
      },
      "tags" => ["elixir", "cache", "ets", "messagepack"],
      "sections" =>
        for s <- 1..6 do
          %{"heading" => "Section #{s}", "paragraphs" => for(p <- 1..3, do: para.(s * 10 + p))}
        end,
      "comments" =>
        for c <- 1..12 do
          %{
            "id" => c,
            "user" => %{"id" => 100 + c, "name" => "user #{c}"},
            "body" => "Comment #{c}: thanks for the article, it helped.",
            "replies" =>
              for(
                r <- 1..2,
                do: %{"id" => c * 10 + r, "body" => "Reply #{r} to #{c}", "likes" => r}
              )
          }
        end
    }
  end

  def page do
    rows =
      for i <- 1..300,
          do:
            ~s(<tr><td class="id">#{i}</td><td><a href="/articles/#{i}">Article number #{i}</a></td><td>#{rem(i * 31, 500)} votes</td></tr>\n)

    IO.iodata_to_binary([
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Articles</title>",
      "<link rel=\"stylesheet\" href=\"/assets/app-3f9a.css\"></head><body><main><table>\n",
      rows,
      "</table></main></body></html>\n"
    ])
  end

  @doc "{name, value} for every structured value, with its MessagePack size in the name's row of the table."
  def all do
    [
      {"query 64k", query(1_100)},
      {"query 1k", query(17)},
      {"document", document()},
      {"page", page()},
      {"link", link(1)}
    ]
  end
end
