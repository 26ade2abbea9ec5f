defmodule Larder.Shortener.DB do
  @moduledoc """
  A stand-in for the post's database (a free Heroku Postgres): `size` connections, each answering one query at a
  time in `query_ms`, so it serves at most `size × 1000 / query_ms` lookups a second however many users ask,
  and queues the rest, as a real connection pool does.
  """

  use GenServer

  def start(size, query_ms) do
    pids = for _ <- 1..size, do: elem(GenServer.start(__MODULE__, query_ms), 1)
    :persistent_term.put({__MODULE__, :pool}, List.to_tuple(pids))
  end

  @doc "The link a slug names, from one of the connections (picked by the caller)."
  def by_slug(slug) do
    pool = :persistent_term.get({__MODULE__, :pool})
    conn = elem(pool, :erlang.phash2(self(), tuple_size(pool)))
    GenServer.call(conn, {:by_slug, slug}, 60_000)
  end

  @impl true
  def init(query_ms), do: {:ok, query_ms}

  @impl true
  def handle_call({:by_slug, slug}, _from, ms) do
    Process.sleep(ms)
    {:reply, %{"id" => 1, "slug" => slug, "long_url" => "http://www.example.com/#{slug}"}, ms}
  end
end
