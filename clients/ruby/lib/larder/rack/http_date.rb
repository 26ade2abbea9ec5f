# frozen_string_literal: true

module Larder
  module Rack
    # HTTP-dates (RFC 9110 §5.6.7) as spec/HTTP.md §1.5 reads them: IMF-fixdate, RFC 850 and asctime; names of days
    # and months and `GMT` in any case, the weekday not checked against the date, everything else exactly as the
    # grammar says. (Ruby's Time.httpdate is looser: any whitespace around the value, years before 1970, and RFC 850
    # years pinned to 1950-2049 rather than to within 50 years of now.)
    module HttpDate
      MONTHS = %w[jan feb mar apr may jun jul aug sep oct nov dec].freeze
      DAYS = %w[mon tue wed thu fri sat sun].freeze
      FULL_DAYS = %w[monday tuesday wednesday thursday friday saturday sunday].freeze
      IMF = /\A([A-Za-z]{3}), ([0-9]{2}) ([A-Za-z]{3}) ([0-9]{4}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) ([A-Za-z]{3})\z/
      RFC850 = /\A([A-Za-z]+), ([0-9]{2})-([A-Za-z]{3})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) ([A-Za-z]{3})\z/
      ASCTIME = /\A([A-Za-z]{3}) ([A-Za-z]{3}) ([0-9]{2}| [0-9]) ([0-9]{2}):([0-9]{2}):([0-9]{2}) ([0-9]{4})\z/

      module_function

      # ms since the epoch, or nil when `text` is not an HTTP-date. `now_ms` resolves RFC 850's two-digit years.
      def parse_ms(text, now_ms: Larder.now_ms)
        text = text.gsub(/\A[ \t]+|[ \t]+\z/, "")
        if (m = IMF.match(text))
          imf_fixdate(m)
        elsif (m = RFC850.match(text))
          rfc850(m, now_ms)
        elsif (m = ASCTIME.match(text))
          asctime(m)
        end
      end

      def imf_fixdate(match)
        return nil unless DAYS.include?(match[1].downcase) && match[8].casecmp?("gmt")

        epoch_ms(match[4].to_i, match[3], match[2].to_i, *match.values_at(5, 6, 7).map(&:to_i))
      end

      def rfc850(match, now_ms)
        return nil unless FULL_DAYS.include?(match[1].downcase) && match[8].casecmp?("gmt")

        year = rfc850_year(match[4].to_i, now_ms)
        epoch_ms(year, match[3], match[2].to_i, *match.values_at(5, 6, 7).map(&:to_i))
      end

      def asctime(match)
        return nil unless DAYS.include?(match[1].downcase)

        epoch_ms(match[7].to_i, match[2], match[3].strip.to_i, *match.values_at(4, 5, 6).map(&:to_i))
      end

      # The most recent year ending in `two_digits` that is not more than 50 years ahead of now.
      def rfc850_year(two_digits, now_ms)
        now_year = Time.at(now_ms / 1000).utc.year
        year = ((now_year / 100) * 100) + two_digits
        year > now_year + 50 ? year - 100 : year
      end

      def epoch_ms(year, month_name, day, hour, minute, second)
        month = MONTHS.index(month_name.downcase)
        return nil if month.nil? || !day.between?(1, 31) || hour > 23 || minute > 59 || second > 60 || year < 1970

        # Time.utc rolls an impossible day over (31 Feb is 3 Mar), as the other implementations' calendar arithmetic
        # does; a leap second 60 likewise counts as the next minute's 0.
        (Time.utc(year, month + 1, 1).to_i + ((day - 1) * 86_400) + (hour * 3600) + (minute * 60) + second) * 1000
      end
    end
  end
end
