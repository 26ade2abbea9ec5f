defmodule Larder.Store.URL do
  @moduledoc """
  Store URLs (spec/STORES.md §1): `scheme://[user[:password]@]host[:port][,host[:port]…][/path][?name=value&…]`.
  Options are taken one by one by the store that reads them; `finish/1` then refuses any option left over, any
  option given twice was already refused, and values that do not parse are errors naming the option: a URL is
  never silently half-used. Messages show the password as `***`.
  """

  defstruct [:text, :scheme, :user, :password, hosts: [], path: "", options: %{}, known: []]

  @default_ports %{"memcached" => 11_211, "redis" => 6379, "postgres" => 5432}
  @size_units %{"" => 1, "K" => 1024, "M" => 1024 ** 2, "G" => 1024 ** 3, "T" => 1024 ** 4}
  @duration_units %{"ms" => 1, "s" => 1000, "m" => 60_000, "h" => 3_600_000}

  @doc "`{:ok, url}` or `{:error, message}`."
  def parse(text) do
    case Regex.run(~r{\A([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)([^?#]*)(?:\?([^#]*))?\z}, text) do
      nil ->
        {:error, "not a store URL (scheme://…): #{redact(text)}"}

      [_, scheme | rest] ->
        [authority, path | q] = rest ++ List.duplicate("", 3 - length(rest))
        url = %__MODULE__{text: text, scheme: String.downcase(scheme), path: decode(path)}

        with {:ok, url} <- authority(url, authority),
             {:ok, options} <- query(url, List.first(q) || "") do
          {:ok, %{url | options: options}}
        end
    end
  end

  @doc "The URL with its password replaced by `***`."
  def redact(%__MODULE__{text: t}), do: redact(t)
  def redact(text), do: Regex.replace(~r{\A([^:]+://[^:@/]*:)[^@/]*@}, text, "\\1***@")

  defp authority(url, authority) do
    {userinfo, hostlist} =
      case String.split(authority, "@") do
        [h] -> {"", h}
        parts -> {parts |> Enum.drop(-1) |> Enum.join("@"), List.last(parts)}
      end

    {user, password} =
      case userinfo do
        "" ->
          {nil, nil}

        u ->
          (String.split(u, ":", parts: 2) ++ [nil])
          |> then(fn [a, b | _] -> {decode(a), b && decode(b)} end)
      end

    hostlist
    |> String.split(",", trim: true)
    |> Enum.reduce_while({:ok, []}, fn part, {:ok, acc} ->
      case Regex.run(~r/\A(\[[^\]]+\]|[^:\[\]]+)(?::(\d*))?\z/, part) do
        nil ->
          {:halt, {:error, "#{redact(url)}: bad host #{inspect(part)}"}}

        [_, host | port] ->
          port =
            case port do
              [p] when p != "" -> String.to_integer(p)
              _ -> Map.get(@default_ports, url.scheme, 0)
            end

          if port in 1..65_535,
            do: {:cont, {:ok, [{host, port} | acc]}},
            else: {:halt, {:error, "#{redact(url)}: port #{port} is outside 1-65535"}}
      end
    end)
    |> case do
      {:ok, hosts} -> {:ok, %{url | user: user, password: password, hosts: Enum.reverse(hosts)}}
      e -> e
    end
  end

  defp query(url, q) do
    q
    |> String.split("&", trim: true)
    |> Enum.reduce_while({:ok, %{}}, fn pair, {:ok, acc} ->
      [name | value] = String.split(pair, "=", parts: 2)
      name = decode(name)

      if Map.has_key?(acc, name),
        do: {:halt, {:error, "#{redact(url)}: option #{inspect(name)} is given twice"}},
        else: {:cont, {:ok, Map.put(acc, name, decode(List.first(value) || ""))}}
    end)
  end

  defp decode(text), do: URI.decode(text)

  @doc "Takes option `name` (a string): `{value or default, url}`."
  def take(url, name, default \\ nil) do
    url = %{url | known: [name | url.known]}
    {v, options} = Map.pop(url.options, name)
    {if(v == nil, do: default, else: v), %{url | options: options}}
  end

  @doc """
  Takes the `prefix` option (spec/STORES.md §2), which goes on the wire before every key: UTF-8 text, as keys are
  (a percent-escape may not smuggle in bytes that are not). Raises ArgumentError otherwise.
  """
  def take_prefix(url) do
    {prefix, url} = take(url, "prefix", "")

    unless String.valid?(prefix),
      do: raise(ArgumentError, "#{redact(url)}: option prefix: not UTF-8 text")

    {prefix, url}
  end

  @doc "Takes a duration (ms): `250`, `250ms`, `2s`, `1m`, `1h`. Raises ArgumentError when it does not parse."
  def take_duration(url, name, default_ms) do
    case take(url, name) do
      {nil, url} ->
        {default_ms, url}

      {v, url} ->
        case Regex.run(~r/\A([0-9]{1,12})(ms|s|m|h)?\z/, v) do
          [_, n] ->
            {String.to_integer(n), url}

          [_, n, unit] ->
            {String.to_integer(n) * @duration_units[unit], url}

          nil ->
            raise ArgumentError,
                  "#{redact(url)}: option #{name}: #{inspect(v)} is not a duration (ms, s, m, h)"
        end
    end
  end

  @doc "Takes a size: bytes with an optional binary suffix (`512K`, `256M`, `10G`)."
  def take_size(url, name, default) do
    case take(url, name) do
      {nil, url} ->
        {default, url}

      {v, url} ->
        case parse_size(v) do
          {:ok, n} ->
            {n, url}

          :error ->
            raise ArgumentError,
                  "#{redact(url)}: option #{name}: #{inspect(v)} is not a size (512K, 256M, 10G)"
        end
    end
  end

  @doc "A size as the store URLs write it (`512K`, `256M`, `10G`; `B`/`iB` and case do not matter): `{:ok, bytes}`."
  def parse_size(text) when is_binary(text) do
    case Regex.run(~r/\A(\d+)\s*([KMGT]?)(?:I?B)?\z/i, String.trim(text)) do
      [_, n, unit] -> {:ok, String.to_integer(n) * @size_units[String.upcase(unit)]}
      nil -> :error
    end
  end

  @doc """
  Takes a file mode (`mode=0640`): three or four octal digits, permission bits only (no setuid, setgid or sticky),
  giving the owner read and write (spec/STORES.md §7). Raises ArgumentError otherwise.
  """
  def take_mode(url, name, default) do
    case take(url, name) do
      {nil, url} ->
        {default, url}

      {text, url} ->
        mode = if text =~ ~r/\A[0-7]{3,4}\z/, do: String.to_integer(text, 8)

        cond do
          mode == nil ->
            raise ArgumentError,
                  "#{redact(url)}: option #{name}: #{inspect(text)} is not three or four octal digits (0600, 0640)"

          mode > 0o777 ->
            raise ArgumentError,
                  "#{redact(url)}: option #{name}: #{text} sets setuid, setgid or sticky bits; give permission bits only (0600, 0640)"

          Bitwise.band(mode, 0o600) != 0o600 ->
            raise ArgumentError,
                  "#{redact(url)}: option #{name}: #{text} does not give the owner read and write"

          true ->
            {mode, url}
        end
    end
  end

  @doc "Takes a non-negative integer."
  def take_integer(url, name, default) do
    case take(url, name) do
      {nil, url} ->
        {default, url}

      {v, url} ->
        if v =~ ~r/\A\d+\z/,
          do: {String.to_integer(v), url},
          else:
            raise(ArgumentError, "#{redact(url)}: option #{name}: #{inspect(v)} is not a number")
    end
  end

  @doc "Takes a boolean (true/false, 1/0, yes/no, on/off)."
  def take_bool(url, name, default) do
    case take(url, name) do
      {nil, url} ->
        {default, url}

      {v, url} ->
        cond do
          String.downcase(v) in ~w(true 1 yes on) ->
            {true, url}

          String.downcase(v) in ~w(false 0 no off) ->
            {false, url}

          true ->
            raise ArgumentError,
                  "#{redact(url)}: option #{name}: #{inspect(v)} is not true or false"
        end
    end
  end

  @doc "Raises ArgumentError for an option no store took (naming it and the known ones)."
  def finish(%__MODULE__{options: options} = url) do
    case Map.keys(options) do
      [] ->
        :ok

      [name | _] ->
        raise ArgumentError,
              "#{redact(url)}: unknown option #{inspect(name)} for #{url.scheme}:// (known: #{url.known |> Enum.reverse() |> Enum.uniq() |> Enum.join(", ")})"
    end
  end
end
