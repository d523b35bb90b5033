package matrix

// For the external tests.
const CryptoBuilt = cryptoBuilt
