# frozen_string_literal: true

module Larder
  VERSION = "0.1.0"
end
